// Formatting numbers, sizes and times for people.

const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];

export function bytes(n) {
  if (n === undefined || n === null) return '—';
  let v = Number(n);
  let u = 0;
  while (Math.abs(v) >= 1024 && u < units.length - 1) { v /= 1024; u++; }
  return `${u === 0 ? v : v.toFixed(v < 10 ? 1 : 0)} ${units[u]}`;
}

export function count(n) {
  if (n === undefined || n === null) return '—';
  return Number(n).toLocaleString('en-US');
}

/** limit renders a limit: -1 is unlimited. */
export function limit(n, fmt = count) {
  return n === -1 ? 'unlimited' : fmt(n);
}

export function when(t) {
  if (!t) return 'never';
  const d = new Date(t);
  return d.toLocaleString('en-GB', { year: 'numeric', month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit' });
}

export function shortKey(k) {
  return k && k.length > 16 ? `${k.slice(0, 8)}…${k.slice(-6)}` : k;
}

/** slug turns a name into something safe for a file name or nats context. */
export function slug(s) {
  const out = String(s).toLowerCase().replace(/[^a-z0-9_-]+/g, '-').replace(/^-+|-+$/g, '');
  return out || 'contrail';
}
