package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	cdppage "github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/nats-io/nats.go/jetstream"
)

// hostileAccount and hostileStream are names that would run script if
// the console ever rendered them as HTML. A stream name cannot hold a
// space, a slash or '>', so it can only open a tag.
const (
	hostileAccount = `<img src=x onerror="window.__xss=1">`
	hostileStream  = `<img_src=x_onerror=alert(1)`
)

// TestConsoleBrowser walks the console's whole path in headless
// chromium against `contrail dev`: sign up, create an account (a field
// error first), create a user and download its creds, publish with
// nats.go using that file, and see the streams, their message counts
// and the usage charts; then API tokens, members, a forged cross-site
// form post and log-out. Every page is shot at desktop and phone width,
// and no page may log a Content-Security-Policy violation or an
// exception.
func TestConsoleBrowser(t *testing.T) {
	d := &devProc{DataDir: filepath.Join(t.TempDir(), "data"), httpAddr: freeAddr(t), natsAddr: freeAddr(t),
		args: []string{"--usage-interval", "1s"}}
	d.URL, d.NatsURL = "http://"+d.httpAddr, "nats://"+d.natsAddr
	d.start(t)
	if !strings.Contains(d.out.String(), "console: "+d.URL+"/") {
		t.Fatalf("contrail dev does not print the console's URL:\n%s", d.out.String())
	}
	b := newTab(t)
	b.do("opening the console", chromedp.Navigate(d.URL+"/"))

	// Sign up.
	b.text("main.auth form")
	b.shoot("login")
	b.clickText("Create an account")
	b.waitText("main.auth h1", "Sign up")
	b.fill("email", "ada@example.com")
	b.fill("password", "correct horse battery")
	b.fill("organization", "Analytical Engines")
	b.shoot("signup")
	b.clickText("Sign up")
	b.waitText(".empty h2", "Create your first account")
	b.shoot("empty")

	// Create an account: a bad limit first, shown next to its field.
	b.clickText("Create your first account")
	b.waitText("h1", "Create account")
	b.fill("name", hostileAccount)
	b.fill("limits.jetstream.max_streams", "-5")
	b.clickText("Create account")
	b.waitText(".field.has-error", "Max streams")
	if got := b.text(".field.has-error .field-error"); !strings.Contains(got, "-1") {
		t.Fatalf("max_streams error = %q, want one naming the allowed values", got)
	}
	b.shoot("account-form-error")
	b.fill("limits.jetstream.max_streams", "10")
	b.clickText("Create account")
	if got := b.text("h1.account-name"); got != hostileAccount {
		t.Fatalf("account heading = %q, want the name as text %q", got, hostileAccount)
	}
	assertNoInjection(t, b)
	b.waitText(".bars", "of 10")
	b.shoot("account-overview")

	// The connect snippets carry the account's URL and copy.
	ctxLine := b.text(`[data-snippet="nats-context"] code`)
	if !strings.Contains(ctxLine, "nats context add") || !strings.Contains(ctxLine, "--server "+d.NatsURL) || !strings.Contains(ctxLine, "--creds ") {
		t.Fatalf("nats context snippet = %q", ctxLine)
	}
	goSnippet := b.text(`[data-snippet="go"] code`)
	if !strings.Contains(goSnippet, `nats.Connect("`+d.NatsURL+`"`) || !strings.Contains(goSnippet, "nats.UserCredentials(") {
		t.Fatalf("Go snippet = %q", goSnippet)
	}
	b.click(`[data-snippet="nats-pub"] button.copy`)
	b.waitText(`[data-snippet="nats-pub"] button.copy`, "Copied")
	if clip := get(b, "reading the clipboard", chromedp.Evaluate[string](`navigator.clipboard.readText()`, chromedp.EvalAwaitPromise)); !strings.Contains(clip, "nats --server "+d.NatsURL) {
		t.Fatalf("clipboard after Copy = %q", clip)
	}

	// Create a user; its creds are shown once, downloaded, and the
	// dialog closes only once they are marked saved.
	b.clickText("Users")
	b.waitText("form.user-form h2", "Create user")
	b.fill("name", "publisher")
	b.clickText("Create user")
	b.text("dialog[open] textarea.creds")
	if eval[bool](b, `[...document.querySelectorAll('dialog[open] button')].find(e => e.textContent === 'Close').disabled`) != true {
		t.Fatal("the creds dialog can be closed before the creds are marked saved")
	}
	b.shoot("creds-dialog")
	creds := b.download("dialog[open] button.primary")
	if !strings.Contains(string(creds), "BEGIN NATS USER JWT") || !strings.Contains(string(creds), "BEGIN USER NKEY SEED") {
		t.Fatalf("downloaded creds:\n%s", creds)
	}
	b.click("#creds-saved")
	b.clickText("Close")
	b.waitJS("the creds dialog to close", `!document.querySelector('dialog[open]')`)
	b.waitText("td.user-name", "publisher")
	b.shoot("users")
	// A second user, revoked after confirming; publisher stays.
	b.fill("name", "temp")
	b.clickText("Create user")
	b.text("dialog[open] textarea.creds")
	b.click("#creds-saved")
	b.clickText("Close")
	b.waitText("td.user-name", "temp")
	// Users are listed in id order, so temp's row is found by its name.
	eval[bool](b, `(() => { [...document.querySelectorAll('table.users tbody tr')].find(r => r.querySelector('td.user-name').textContent === 'temp').querySelector('button.danger').click(); return true; })()`)
	b.text("dialog[open] button.danger")
	b.clickText("Revoke user")
	b.waitJS("temp to be revoked", `[...document.querySelectorAll('td.user-name')].map(e => e.textContent).join() === 'publisher'`)

	// Publish with stock nats.go and the downloaded file.
	credsPath := writeFile(t, t.TempDir(), "publisher.creds", string(creds))
	nc := connectCreds(t, d.NatsURL, credsPath)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), ioTimeout)
	defer cancel()
	for _, cfg := range []jetstream.StreamConfig{{Name: "ORDERS", Subjects: []string{"orders.>"}}, {Name: hostileStream, Subjects: []string{"evil.<b"}}} {
		if _, err := js.CreateStream(ctx, cfg); err != nil {
			t.Fatalf("creating stream %q: %v", cfg.Name, err)
		}
	}
	for i := range 3 {
		if _, err := js.Publish(ctx, "orders.new", fmt.Appendf(nil, "order %d", i)); err != nil {
			t.Fatal(err)
		}
	}

	// The streams table shows both, the hostile name as text.
	b.clickText("Streams")
	b.waitText("td.stream-name", "ORDERS")
	row := eval[[]string](b, `[...document.querySelectorAll('table.streams tr')].filter(r => r.querySelector('td.stream-name')?.textContent === 'ORDERS').map(r => r.querySelector('td.stream-messages').textContent)`)
	if len(row) != 1 || row[0] != "3" {
		t.Fatalf("ORDERS messages in the console = %v, want [3]", row)
	}
	b.waitText("td.stream-name", hostileStream)
	assertNoInjection(t, b)
	b.shoot("streams")

	// Usage charts fill in as the sampler runs (every second here).
	b.clickText("Usage")
	b.text(`[data-chart="Messages"] canvas`)
	// The charts refresh themselves at the sampling interval.
	b.waitJS("a sample with 3 messages", `document.querySelector('[data-chart="Messages"] figcaption .muted')?.textContent === '3'`)
	b.shoot("usage")

	// Settings: the form holds the current limits and saves new ones;
	// deleting needs the name typed.
	b.clickText("Settings")
	b.waitJS("the current limits in the form", `document.querySelector('input[name="limits.jetstream.max_streams"]')?.value === '10'`)
	b.fill("limits.jetstream.max_streams", "20")
	b.clickText("Save changes")
	b.waitText(".ok", "Saved")
	b.waitJS("the saved limit in the form", `document.querySelector('input[name="limits.jetstream.max_streams"]')?.value === '20'`)
	b.clickText("Delete account…")
	b.text("dialog[open] #confirm-name")
	ready := `!document.querySelector('dialog[open] button.danger').disabled`
	if eval[bool](b, ready) {
		t.Fatal("delete is enabled before the name is typed")
	}
	b.fill("confirm", hostileAccount)
	b.waitJS("delete to be enabled once the name is typed", ready)
	b.shoot("settings-delete")
	b.clickText("Cancel")
	b.waitJS("the delete dialog to close", `!document.querySelector('dialog[open]')`)

	// API tokens: shown once, with the prefix; last use is recorded.
	b.clickText("API tokens")
	b.waitText("h1", "API tokens")
	b.fill("name", "terraform")
	b.clickText("Create token")
	token := b.text("dialog[open] code.new-token")
	if !strings.HasPrefix(token, "contrail_api_") {
		t.Fatalf("new token %q lacks the contrail_api_ prefix", token)
	}
	b.shoot("token-dialog")
	b.click("#token-saved")
	b.clickText("Close")
	b.waitJS("the token dialog to close", `!document.querySelector('dialog[open]')`)
	var accts items[cpAccount]
	newAPI(t, d.URL).as(token).do("GET", "/v1/accounts", nil, 200, &accts)
	if len(accts.Items) != 1 || accts.Items[0].Name != hostileAccount || accts.Items[0].Limits.JetStream.MaxStreams != 20 {
		t.Fatalf("accounts with the new token: %+v (want the console's name and its max_streams 20)", accts.Items)
	}
	b.do("reloading", chromedp.Reload())
	b.waitText("td.token-name", "terraform")
	if used := b.text("table.tokens tbody tr td:nth-child(4)"); used == "never" {
		t.Fatal("the token's last use is not shown after it was used")
	}
	b.shoot("tokens")
	b.click("table.tokens button.danger")
	b.clickText("Revoke token")
	b.waitText(".empty-line", "No API tokens yet")
	newAPI(t, d.URL).as(token).problemOf("GET", "/v1/accounts", nil, 401, false)

	b.clickText("Members")
	b.waitText("table.members td", "ada@example.com")
	b.shoot("members")

	crossSiteFormRefused(t, b, d, hostileAccount)

	// Delete the account for real, with its name typed: the console is
	// back at its empty state, and the account's creds stop working.
	b.click("td a[data-account]")
	b.waitText("h1.account-name", hostileAccount)
	b.clickText("Settings")
	b.clickText("Delete account…")
	b.fill("confirm", hostileAccount)
	b.waitJS("delete to be enabled once the name is typed", ready)
	b.click("dialog[open] button.danger")
	b.waitText(".empty h2", "Create your first account")
	b.shoot("deleted")
	waitFor(t, ioTimeout, "the deleted account's creds to be refused", func() bool {
		c, err := dialCreds(d.NatsURL, credsPath, nil)
		if err == nil {
			c.Close()
		}
		return err != nil
	})

	// Log out: the session is gone, and the console asks to log in.
	b.clickText("Log out")
	b.text("main.auth form")
	b.do("opening accounts", chromedp.Navigate(d.URL+"/#/accounts"), chromedp.Reload())
	b.text("main.auth form")

	for _, m := range b.messages() {
		if mentionsCSP(m) {
			t.Errorf("the console broke its CSP: %s", m)
		}
		if strings.HasPrefix(m, "exception") {
			t.Errorf("the console threw: %s", m)
		}
	}
	// The check above can see a violation: an inline style added now is
	// refused by the CSP, and the browser says so.
	eval[bool](b, `(() => { const s = document.createElement('style'); s.textContent = 'body { color: red }'; document.head.appendChild(s); return true; })()`)
	waitFor(t, browserTimeout, "the browser to report the inline style the CSP refused", func() bool {
		for _, m := range b.messages() {
			if mentionsCSP(m) {
				return true
			}
		}
		return false
	})
}

func mentionsCSP(msg string) bool {
	low := strings.ToLower(msg)
	return strings.Contains(low, "content security policy") || strings.Contains(low, "content-security-policy")
}

// assertNoInjection fails if a hostile name became markup or ran.
func assertNoInjection(t *testing.T, b *tab) {
	t.Helper()
	if n := eval[int](b, `document.querySelectorAll('#app img').length`); n != 0 {
		t.Fatalf("a name was rendered as HTML: %d img elements", n)
	}
	if eval[bool](b, `window.__xss === 1`) {
		t.Fatal("a hostile name ran script")
	}
}

// crossSiteFormRefused submits, from a page on another origin of the
// same site (another loopback port: the SameSite cookie is still sent),
// a form that would create an account with a JSON text/plain body, and
// requires the control plane to refuse it for its origin (403, not the
// 401 of a missing cookie) and create nothing.
func crossSiteFormRefused(t *testing.T, b *tab, d *devProc, keep string) {
	t.Helper()
	ln := listenLoopback(t)
	page := fmt.Sprintf(`<!doctype html><form method="POST" action="%s/v1/accounts" enctype="text/plain">
<input type="hidden" name='{"name":"forged' value='"}'><button id="go">go</button></form>`, d.URL)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, page)
	}), ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	b.do("opening the forging page", chromedp.Navigate("http://"+ln.Addr().String()+"/"))
	b.do("waiting for #go", chromedp.WaitVisible(chromedp.CSS("#go")))
	get(b, "posting the forged form", chromedp.WaitEvent(cdppage.LoadEventFired, nil, chromedp.Click(chromedp.CSS("#go"))))
	var p cpProblem
	if err := json.Unmarshal([]byte(eval[string](b, `document.body.innerText`)), &p); err != nil {
		t.Fatalf("the forged post's answer is not a problem: %v", err)
	}
	if p.Status != http.StatusForbidden || !strings.HasSuffix(p.Type, "/forbidden") {
		t.Fatalf("forged cross-site post answered %+v, want 403 forbidden", p)
	}
	b.shoot("forged-post")
	b.do("back to the console", chromedp.Navigate(d.URL+"/#/accounts"))
	b.waitText("td a", keep)
	if n := eval[int](b, `[...document.querySelectorAll('td a')].filter(a => a.textContent.startsWith('forged')).length`); n != 0 {
		t.Fatal("the forged post created an account")
	}
}

// TestConsoleUsageKeptAcrossRestart: the usage samples behind the
// console's charts survive a restart of `contrail dev`, and sampling
// goes on after it.
func TestConsoleUsageKeptAcrossRestart(t *testing.T) {
	d := &devProc{DataDir: filepath.Join(t.TempDir(), "data"), httpAddr: freeAddr(t), natsAddr: freeAddr(t),
		args: []string{"--usage-interval", "1s"}}
	d.URL, d.NatsURL = "http://"+d.httpAddr, "nats://"+d.natsAddr
	d.start(t)
	a, _ := newAPI(t, d.URL).signup("kept@example.com", "Kept")
	acc := a.createAccount("charts", nil)
	type history struct {
		Series struct {
			Connections []struct{ X, Y int64 } `json:"connections"`
		} `json:"series"`
	}
	xs := func() []int64 {
		var h history
		a.do("GET", "/v1/accounts/"+acc.ID+"/usage/history", nil, 200, &h)
		var out []int64
		for _, p := range h.Series.Connections {
			out = append(out, p.X)
		}
		return out
	}
	waitFor(t, 20*time.Second, "two usage samples", func() bool { return len(xs()) >= 2 })
	before := xs()
	d.stop()
	d.start(t)
	var login struct{ Token string }
	newAPI(t, d.URL).do("POST", "/v1/login", map[string]string{"email": "kept@example.com", "password": "correct horse battery"}, 200, &login)
	a = a.as(login.Token)
	kept := xs()
	if len(kept) < len(before) || fmt.Sprint(kept[:len(before)]) != fmt.Sprint(before) {
		t.Fatalf("after a restart the history starts %v, want the samples taken before it, %v", kept, before)
	}
	last := kept[len(kept)-1]
	waitFor(t, 20*time.Second, "a sample after the restart", func() bool {
		now := xs()
		return len(now) > 0 && now[len(now)-1] > last
	})
}
