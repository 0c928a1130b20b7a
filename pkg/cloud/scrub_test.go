package cloud

import (
	"encoding/base64"
	"encoding/hex"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestScrubRemovesEveryFormOfASecret(t *testing.T) {
	const secret = `tok"en/with+special=chars\1234`
	forms := map[string]string{
		"plain":        secret,
		"base64":       base64.StdEncoding.EncodeToString([]byte(secret)),
		"base64 raw":   base64.RawStdEncoding.EncodeToString([]byte(secret)),
		"base64url":    base64.URLEncoding.EncodeToString([]byte(secret)),
		"hex":          hex.EncodeToString([]byte(secret)),
		"HEX":          strings.ToUpper(hex.EncodeToString([]byte(secret))),
		"go-quoted":    strings.Trim(strconv.Quote(secret), `"`),
		"json-escaped": `tok\"en/with+special=chars\\1234`,
	}
	for name, form := range forms {
		got := Scrub("the API said: "+form+" is wrong", secret)
		if strings.Contains(got, form) {
			t.Errorf("%s: %q still holds the secret", name, got)
		}
		if !strings.Contains(got, Redacted) {
			t.Errorf("%s: %q does not show the redaction", name, got)
		}
	}
	if got := Scrub("a short t in a message", "t"); got != "a short t in a message" {
		t.Errorf("a too-short secret mangled the message: %q", got)
	}
}

func TestTruncate(t *testing.T) {
	if s := Truncate("short"); s != "short" {
		t.Errorf("Truncate(short) = %q", s)
	}
	long := strings.Repeat("é", MaxMessageLen)
	got := Truncate(long)
	if len(got) > MaxMessageLen || !strings.HasSuffix(got, "(truncated)") || !utf8.ValidString(got) {
		t.Errorf("Truncate of %d bytes = %d bytes, valid UTF-8 %v, suffix %q", len(long), len(got), utf8.ValidString(got), got[len(got)-20:])
	}
}
