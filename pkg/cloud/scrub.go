package cloud

import (
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"strings"
)

// MinSecretLen keeps scrubbing from mangling messages: a secret shorter
// than this (a test token such as "t") would match ordinary words, and no
// real token, key or user data is that short.
const MinSecretLen = 8

// Redacted replaces a secret in a message.
const Redacted = "[redacted]"

// Scrub removes secrets from a message a cloud sent back (an error, an
// echoed field): no cloud is known to echo credentials or user data, but the
// message ends up in Machine status, events and logs, where neither may ever
// appear. Each secret is removed as it is and in the forms an API or a
// library would write it: JSON- and Go-escaped, base64 (standard and URL
// alphabets, with and without padding; user data travels base64-encoded)
// and hex.
func Scrub(msg string, secrets ...string) string {
	for _, s := range secrets {
		if len(s) < MinSecretLen {
			continue
		}
		for _, form := range secretForms(s) {
			if form != "" {
				msg = strings.ReplaceAll(msg, form, Redacted)
			}
		}
	}
	return msg
}

func secretForms(s string) []string {
	b := []byte(s)
	forms := []string{
		s,
		base64.StdEncoding.EncodeToString(b),
		base64.RawStdEncoding.EncodeToString(b),
		base64.URLEncoding.EncodeToString(b),
		base64.RawURLEncoding.EncodeToString(b),
		hex.EncodeToString(b),
		strings.ToUpper(hex.EncodeToString(b)),
	}
	if j, err := json.Marshal(s); err == nil {
		forms = append(forms, strings.Trim(string(j), `"`))
	}
	forms = append(forms, strings.Trim(strconv.Quote(s), `"`))
	// Longest first: a form must not be cut up by a shorter one it contains.
	for i := 1; i < len(forms); i++ {
		for j := i; j > 0 && len(forms[j]) > len(forms[j-1]); j-- {
			forms[j], forms[j-1] = forms[j-1], forms[j]
		}
	}
	return forms
}

// MaxMessageLen bounds a message the provider writes into an event, a
// condition or a Machine's errorMessage: a cloud or proxy may answer with a
// whole HTML page, and a status write must never approach the API server's
// object size limit.
const MaxMessageLen = 1024

// Truncate shortens a message to MaxMessageLen bytes, on a rune boundary,
// saying that it did.
func Truncate(msg string) string {
	if len(msg) <= MaxMessageLen {
		return msg
	}
	const suffix = " … (truncated)"
	cut := MaxMessageLen - len(suffix)
	for cut > 0 && !isRuneStart(msg[cut]) {
		cut--
	}
	return msg[:cut] + suffix
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }
