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

// MinExcerpt is the shortest piece of a secret that Scrub recognises in a
// message: a parser that quotes the input it choked on ("unexpected token
// near '…'") quotes a window of the user data, a proxy's error page a
// window of a header. Shorter pieces are indistinguishable from ordinary
// text.
const MinExcerpt = 8

// Redacted replaces a secret in a message.
const Redacted = "[redacted]"

// Withheld is what Scrub leaves of a message that quoted a piece of a
// secret: nothing of it. What the provider knows besides (the call, the
// status, the field) its caller says around it.
const Withheld = "the API's message is withheld: it quoted part of the credentials or the user data"

// Scrub removes secrets from a message a cloud sent back (an error, an
// echoed field), which ends up in Machine status, events and logs, where no
// secret may ever appear, whole or in part.
//
// Each secret is removed as it is and in the forms an API or a library
// would write it: JSON- and Go-escaped, base64 (standard and URL alphabets,
// with and without padding; user data travels base64-encoded) and hex. A
// message that still holds a piece of a secret after that (MinExcerpt bytes
// or more of any of those forms: an excerpt a parser quoted, a window of a
// key) is withheld as a whole, as where a piece ends cannot be told: Scrub
// returns Withheld, and the caller says what it knows instead.
func Scrub(msg string, secrets ...string) string {
	// Bounded first: the search for pieces below is quadratic-ish, and
	// the message is truncated where it is shown anyway. A secret that
	// truncation cuts is found as a piece.
	msg = Truncate(msg)
	var all []string
	for _, s := range secrets {
		if len(s) < MinSecretLen {
			continue
		}
		for _, form := range secretForms(s) {
			if form != "" {
				msg = strings.ReplaceAll(msg, form, Redacted)
				all = append(all, form)
			}
		}
	}
	if quotes(msg, all) {
		return Withheld
	}
	return msg
}

// Quotes reports whether msg holds a piece of at least MinExcerpt bytes of
// a secret, in any form Scrub knows.
func Quotes(msg string, secrets ...string) bool {
	msg = Truncate(msg)
	var all []string
	for _, s := range secrets {
		if len(s) >= MinSecretLen {
			all = append(all, secretForms(s)...)
		}
	}
	return quotes(msg, all)
}

// quotes looks for every window of MinExcerpt bytes of msg in the forms.
// Messages are short (an API's error, at most MaxMessageLen once
// truncated) and this runs on failures only, so a plain search will do.
func quotes(msg string, forms []string) bool {
	if len(msg) < MinExcerpt || len(forms) == 0 {
		return false
	}
	// NUL separates the forms: no window spans two of them.
	hay := strings.Join(forms, "\x00")
	for i := 0; i+MinExcerpt <= len(msg); i++ {
		w := msg[i : i+MinExcerpt]
		if strings.Contains(w, Redacted) || strings.ContainsRune(w, 0) {
			continue
		}
		if strings.Contains(hay, w) {
			return true
		}
	}
	return false
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
