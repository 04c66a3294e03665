package jetstream

import "testing"

func TestHeaderValue(t *testing.T) {
	hdr := []byte("NATS/1.0\r\nNats-Msg-Id: abc\r\nNats-Expected-Last-Sequence:  7 \r\nX: y\r\n\r\n")
	for key, want := range map[string]string{
		"Nats-Msg-Id":                 "abc",
		"Nats-Expected-Last-Sequence": "7",
		"X":                           "y",
		"Nats-Msg":                    "",
		"Missing":                     "",
	} {
		if got := string(headerValue(hdr, key)); got != want {
			t.Errorf("%s = %q, want %q", key, got, want)
		}
	}
	if headerValue(nil, "X") != nil || headerValue([]byte("NATS/1.0"), "X") != nil {
		t.Fatal("empty header blocks have no values")
	}
	if got := string(appendHeaderBlock(nil, "404", "A", "b")); got != "NATS/1.0 404\r\nA: b\r\n\r\n" {
		t.Fatalf("block = %q", got)
	}
}
