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

// TestScrubWithholdsExcerpts: a parser that quotes the input it choked on,
// or a proxy that quotes a header, gives a piece of a secret, not all of
// it. No piece of MinExcerpt bytes or more survives, in any form; the
// message is withheld as a whole.
func TestScrubWithholdsExcerpts(t *testing.T) {
	const token = "Q7vX2mLp9RtK4wZs8NcBd3Hf"
	userData := `{"ignition":{"version":"3.4.0"},"passwd":{"users":[{"name":"core","passwordHash":"Jm5Tq8Wc2Lx7Rv4Kp9Zd"}]}}`
	b64 := base64.StdEncoding.EncodeToString([]byte(userData))
	cases := map[string]string{
		"a window of the token":              "Invalid token '" + token[5:17] + "'",
		"the token's last characters":        "Invalid token: ..." + token[len(token)-MinExcerpt:],
		"a window of the user data":          "user_data: unexpected token near '" + userData[60:84] + "'",
		"a window of the user data's base64": "Invalid value in user-data: illegal base64 near " + b64[40:56],
		"a window, JSON-escaped":             `parse error near \"name\":\"core\",\"passw`,
		"a window, hex":                      "bad bytes " + hex.EncodeToString([]byte(token[3:12])),
	}
	for name, msg := range cases {
		got := Scrub(msg, token, userData)
		if got != Withheld {
			t.Errorf("%s: Scrub(%q) = %q, want it withheld", name, msg, got)
		}
		if !Quotes(msg, token, userData) {
			t.Errorf("%s: Quotes(%q) = false", name, msg)
		}
	}
	for _, msg := range []string{
		"Invalid value in disk-size (description: `Instance disk size in GiB`) - should be an Integer between 10 51200",
		"Instance 6e1f2c1a-0000-4000-8000-000000000001 not found",
		"You do not have permission to perform this action.",
		"the token " + token + " is wrong",
	} {
		got := Scrub(msg, token, userData)
		if got == Withheld {
			t.Errorf("Scrub(%q) withheld a message with no piece of a secret left", msg)
		}
		if strings.Contains(got, token) {
			t.Errorf("Scrub(%q) = %q keeps the token", msg, got)
		}
	}
}

// BenchmarkScrubWorstCase: the longest message (MaxMessageLen) quoting
// nothing, against the largest user data a cloud takes and a token: every
// window is looked for in every form.
func BenchmarkScrubWorstCase(b *testing.B) {
	userData := strings.Repeat("Jm5Tq8Wc2Lx7Rv4K", 49149/16)
	msg := strings.Repeat("Invalid value in disk-size - should be an Integer! ", MaxMessageLen/50)
	b.ResetTimer()
	for range b.N {
		if Scrub(msg, "Q7vX2mLp9RtK4wZs8NcBd3Hf", userData) == Withheld {
			b.Fatal("withheld")
		}
	}
}
