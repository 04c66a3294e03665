package main

// Browser helpers for the console tests (e2e_console_test.go): Debian's
// chromium driven headless through chromedp, with every console message
// and exception collected, and screenshots at desktop and phone widths.

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
)

// browserTimeout bounds each browser step; a race-built dev binary on
// two shared cores is slow to answer its first requests.
const browserTimeout = 30 * time.Second

// screenWidths are the widths every page is shot at.
var screenWidths = []struct {
	name          string
	width, height int64
	mobile        bool
}{{"desktop", 1280, 900, false}, {"phone", 390, 844, true}}

// tab is one browser tab, with what its pages logged.
type tab struct {
	t        testing.TB
	ctx      context.Context
	shotsDir string
	dlDir    string

	mu   sync.Mutex
	logs []string // console messages, exceptions and browser log entries
	done chan string
}

// findChromium finds the browser or fails the test: the browser tests
// are part of `make test`, which installs chromium, so a missing one is
// a broken setup, not a reason to skip.
func findChromium(t testing.TB) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("chromium is not installed: the console's browser tests need it (`make tools` installs it with apt-get install chromium)")
	return ""
}

// newTab starts headless chromium with the flags these machines need
// and returns a tab in it. Screenshots go to $CONTRAIL_SCREENSHOTS if
// set, else to a directory under the test's temp dir.
func newTab(t testing.TB) *tab {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(findChromium(t)),
		chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(actx)
	t.Cleanup(func() { cancelCtx(); cancelAlloc() })
	b := &tab{t: t, ctx: ctx, dlDir: t.TempDir(), done: make(chan string, 4)}
	b.shotsDir = os.Getenv("CONTRAIL_SCREENSHOTS")
	if b.shotsDir == "" {
		b.shotsDir = filepath.Join(t.TempDir(), "screenshots")
	}
	if err := os.MkdirAll(b.shotsDir, 0o755); err != nil {
		t.Fatal(err)
	}
	// The first Run starts the browser, on ctx itself (a timeout there
	// would end the browser with it).
	if err := chromedp.Do(ctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatalf("starting chromium: %v", err)
	}
	msgs := chromedp.Console(ctx)
	go func() {
		for m, err := range msgs {
			if err != nil {
				return
			}
			b.log(m.String())
		}
	}()
	downloads := chromedp.BrowserEvents(ctx, browser.DownloadProgress)
	go func() {
		for ev, err := range downloads {
			if err != nil {
				return
			}
			if ev.State == browser.DownloadProgressStateCompleted {
				b.done <- ev.GUID
			}
		}
	}()
	events := true
	if _, err := chromedp.CallBrowser(ctx, browser.SetDownloadBehavior, browser.SetDownloadBehaviorParams{
		Behavior: browser.SetDownloadBehaviorBehaviorAllowAndName, DownloadPath: b.dlDir, EventsEnabled: &events}); err != nil {
		t.Fatalf("download behaviour: %v", err)
	}
	for _, perm := range []string{"clipboard-write", "clipboard-read"} {
		if _, err := chromedp.CallBrowser(ctx, browser.SetPermission, browser.SetPermissionParams{
			Permission: &browser.PermissionDescriptor{Name: perm}, Setting: browser.PermissionSettingGranted}); err != nil {
			t.Fatalf("permission %s: %v", perm, err)
		}
	}
	t.Logf("console screenshots: %s", b.shotsDir)
	return b
}

func (b *tab) log(s string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.logs = append(b.logs, s)
}

// messages returns what the pages logged so far.
func (b *tab) messages() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.logs...)
}

// do runs browser actions, failing the test (with what the page logged)
// if they fail or take longer than browserTimeout.
func (b *tab) do(what string, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, browserTimeout)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		b.fail(what, err)
	}
}

func (b *tab) fail(what string, err error) {
	b.t.Helper()
	var loc string
	ctx, cancel := context.WithTimeout(b.ctx, 2*time.Second)
	defer cancel()
	loc, _ = chromedp.Run(ctx, chromedp.Location())
	body, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body ? document.body.innerText : ""`))
	b.t.Fatalf("browser: %s: %v\nat %s, page text:\n%s\npage log:\n%s", what, err, loc, tail(body, 2000), strings.Join(b.messages(), "\n"))
}

// get runs one action that returns a value.
func get[T any](b *tab, what string, a chromedp.Action[T]) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, browserTimeout)
	defer cancel()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		b.fail(what, err)
	}
	return v
}

// text returns the text of the first element sel matches, once visible.
func (b *tab) text(sel string) string {
	b.t.Helper()
	b.do("waiting for "+sel, chromedp.WaitVisible(chromedp.CSS(sel)))
	return get(b, "reading "+sel, chromedp.Text(chromedp.CSS(sel)))
}

// eval evaluates a JavaScript expression.
func eval[T any](b *tab, expr string) T {
	b.t.Helper()
	return get(b, "evaluating "+expr, chromedp.Evaluate[T](expr))
}

// waitJS waits until the JavaScript expression is truthy.
func (b *tab) waitJS(what, expr string) {
	b.t.Helper()
	get(b, "waiting for "+what, chromedp.Poll[bool](expr, chromedp.WithPollingInterval(50*time.Millisecond)))
}

// waitText waits until an element sel matches holds want in its text.
func (b *tab) waitText(sel, want string) {
	b.t.Helper()
	b.waitJS(fmt.Sprintf("%q in %s", want, sel),
		fmt.Sprintf(`Array.from(document.querySelectorAll(%q)).some(e => e.textContent.includes(%q))`, sel, want))
}

// fill types value into the input named name (clearing it first).
func (b *tab) fill(name, value string) {
	b.t.Helper()
	css := fmt.Sprintf(`input[name=%q]`, name)
	sel := chromedp.CSS(css)
	// Emptied as a person would (select all, delete), so the page sees
	// the input events.
	clear := fmt.Sprintf(`(() => { const e = document.querySelector(%q); e.value = ''; e.dispatchEvent(new Event('input', {bubbles: true})); return true; })()`, css)
	b.do("filling "+name, chromedp.WaitVisible(sel), chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := chromedp.Evaluate[bool](clear)(ctx, t)
		return err
	}), chromedp.SendKeys(sel, value))
}

// click clicks the first element sel matches.
func (b *tab) click(sel string) {
	b.t.Helper()
	b.do("clicking "+sel, chromedp.WaitVisible(chromedp.CSS(sel)), chromedp.Click(chromedp.CSS(sel)))
}

// clickText clicks the first enabled button or link whose text is label.
func (b *tab) clickText(label string) {
	b.t.Helper()
	sel := chromedp.Search(fmt.Sprintf(`//*[self::button or self::a][normalize-space()=%q][not(@disabled)]`, label))
	b.do("clicking "+label, chromedp.WaitVisible(sel), chromedp.Click(sel))
}

// shoot saves a full-page screenshot of the page at each width, named
// <name>-<width>.png, and returns the browser to desktop width.
func (b *tab) shoot(name string) {
	b.t.Helper()
	for _, w := range screenWidths {
		b.do("width "+w.name, chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
			_, err := chromedp.Call(ctx, emulation.SetDeviceMetricsOverride, emulation.SetDeviceMetricsOverrideParams{
				Width: w.width, Height: w.height, DeviceScaleFactor: 1, Mobile: w.mobile})
			return err
		}))
		// Two frames: the page has laid itself out at the new width.
		get(b, "layout", chromedp.Evaluate[bool](`new Promise(r => requestAnimationFrame(() => requestAnimationFrame(() => r(true))))`,
			chromedp.EvalAwaitPromise))
		img := get(b, "screenshot "+name, chromedp.FullScreenshot(100))
		if err := os.WriteFile(filepath.Join(b.shotsDir, name+"-"+w.name+".png"), img, 0o644); err != nil {
			b.t.Fatal(err)
		}
	}
	b.do("desktop width", chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
		_, err := chromedp.Call(ctx, emulation.ClearDeviceMetricsOverride, cdp.Empty{})
		return err
	}))
}

// download clicks sel and returns the file the download it starts
// saves. AllowAndName saves it under its GUID, so the name the page
// chose is not what is on disk; the content is what matters.
func (b *tab) download(sel string) []byte {
	b.t.Helper()
	b.click(sel)
	guid := recvChan(b.t, b.done, "the creds download")
	return mustRead(b.t, filepath.Join(b.dlDir, guid))
}
