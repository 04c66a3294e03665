package web

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"regexp"
	"strings"
	"testing"
)

// TestVendoredFilesMatchTheirSums: every vendored module and style is
// the file recorded in SHA256SUMS, and nothing else executable is there.
func TestVendoredFilesMatchTheirSums(t *testing.T) {
	sums, err := fs.ReadFile(FS, "vendor/SHA256SUMS")
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(sums))
	for sc.Scan() {
		sum, name, ok := strings.Cut(sc.Text(), "  ")
		if !ok {
			t.Fatalf("SHA256SUMS line %q", sc.Text())
		}
		data, err := fs.ReadFile(FS, "vendor/"+name)
		if err != nil {
			t.Fatal(err)
		}
		got := sha256.Sum256(data)
		if hex.EncodeToString(got[:]) != sum {
			t.Errorf("vendor/%s: SHA-256 %x, SHA256SUMS says %s", name, got, sum)
		}
		listed[name] = true
	}
	entries, err := fs.ReadDir(FS, "vendor")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		n := e.Name()
		if (strings.HasSuffix(n, ".js") || strings.HasSuffix(n, ".css")) && !listed[n] {
			t.Errorf("vendor/%s is not in SHA256SUMS", n)
		}
	}
}

// TestNoInlineScriptOrStyle: the CSP allows only files from the console's
// own origin, so the page must carry no inline script, style element or
// style attribute, and no module may set HTML from a string.
func TestNoInlineScriptOrStyle(t *testing.T) {
	index, err := fs.ReadFile(FS, "index.html")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range regexp.MustCompile(`(?s)<script([^>]*)>(.*?)</script>`).FindAllSubmatch(index, -1) {
		if !bytes.Contains(m[1], []byte("src=")) || len(bytes.TrimSpace(m[2])) > 0 {
			t.Errorf("index.html has an inline script: %s", m[0])
		}
	}
	for _, re := range []string{`<style`, `\sstyle=`, `\son[a-z]+=`} {
		if m := regexp.MustCompile(re).Find(index); m != nil {
			t.Errorf("index.html has %q", m)
		}
	}
	err = fs.WalkDir(FS, "app", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		src, err := fs.ReadFile(FS, path)
		if err != nil {
			return err
		}
		for _, bad := range []string{"innerHTML", "outerHTML", "insertAdjacentHTML", "dangerouslySetInnerHTML", "document.write", "eval(", "new Function", "localStorage", "sessionStorage", "style="} {
			if bytes.Contains(src, []byte(bad)) {
				t.Errorf("%s uses %s", path, bad)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
