// Package canary finds secrets that leaked into text, in whatever form a
// logger, an encoder or a debug dump gave them.
//
// Tests plant canaries (unique, random-looking values) as API tokens, user
// data and secret keys, run the provider, and scan everything it wrote. A
// secret rarely leaks verbatim: it is JSON-escaped or Go-quoted inside a
// log field, wrapped over lines, hex-dumped by a client's body dump, or
// base64-encoded as Kubernetes encodes a Secret's data. Find looks for all
// of these:
//
//   - plain, and after undoing JSON, Go and shell escapes (several levels);
//   - split over lines: wrapped at any column (also with indentation), or
//     its halves ending one line and appearing on the next (as when a log
//     line is cut and the rest gets a prefix of its own);
//   - as hex, lower or upper case, continuous or as hexdump -C, xxd and
//     Go hex.Dump write it (offsets, spaces, line breaks, ASCII column);
//   - as Go prints a []byte: [115 101 99 ...];
//   - base64-encoded, standard or URL alphabet, with or without padding, at
//     any of the three byte alignments within a longer encoded value, and
//     wrapped (76 columns or any other width);
//   - and the encodings combined with the views: a hex dump of a JSON body
//     holding the base64 of the canary is found too.
//
// Canaries should be at least 12 characters of random-looking text, so
// that nothing else matches them.
package canary

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Finding is a canary found in a text.
type Finding struct {
	Canary string
	// Form says how it was written: "plain", "base64 (std, offset 1)",
	// "hex dump", ...
	Form string
}

func (f Finding) String() string { return fmt.Sprintf("%q (%s)", f.Canary, f.Form) }

// Scan returns a Finding for each canary that text holds in any form.
func Scan(text string, canaries ...string) []Finding {
	vs := views(text)
	var out []Finding
	for _, c := range canaries {
		if form, ok := find(vs, text, c); ok {
			out = append(out, Finding{Canary: c, Form: form})
		}
	}
	return out
}

// ScanExcerpts returns a Finding for each canary of which text holds a
// piece of at least minLen bytes, as it is or after undoing escapes: what a
// cloud's parser ("unexpected token near '…'") or a proxy's error page
// quotes of a secret. Such canaries must be random throughout (no word of
// them may be ordinary text), and minLen long enough that chance does not
// produce one.
func ScanExcerpts(text string, minLen int, canaries ...string) []Finding {
	vs := []view{{name: "raw", text: []byte(text)}}
	if unesc := unescapeAll([]byte(text)); !bytes.Equal(unesc, vs[0].text) {
		vs = append(vs, view{name: "escaped", text: unesc})
	}
	var out []Finding
	for _, c := range canaries {
	search:
		for i := 0; i+minLen <= len(c); i++ {
			piece := []byte(c[i : i+minLen])
			for _, v := range vs {
				if bytes.Contains(v.text, piece) {
					out = append(out, Finding{Canary: c, Form: fmt.Sprintf("excerpt %q (%s)", piece, v.name)})
					break search
				}
			}
		}
	}
	return out
}

// Find says whether text holds canary in any form, and in which.
func Find(text, canary string) (form string, found bool) {
	return find(views(text), text, canary)
}

// view is the text transformed, so that an encoded canary shows.
type view struct {
	name string
	text []byte
}

// needle is a form of the canary to search views for.
type needle struct {
	name string
	b    []byte
	// fold makes the search case-insensitive (hex).
	fold bool
}

func find(vs []view, text, canary string) (string, bool) {
	if canary == "" {
		return "", false
	}
	ns := needles(canary)
	for _, v := range vs {
		for _, n := range ns {
			hay := v.text
			if n.fold {
				hay = bytes.ToLower(hay)
			}
			if bytes.Contains(hay, n.b) {
				return describe(n.name, v.name), true
			}
		}
	}
	for _, v := range []string{text, string(unescapeAll([]byte(text)))} {
		if splitOverLines(v, canary) {
			return "split over lines", true
		}
	}
	return "", false
}

func describe(needle, view string) string {
	switch {
	case view == "raw":
		return needle
	case needle == "plain":
		return view
	}
	return needle + " in " + view
}

// needles are the canary as written plainly, as hex and as the stable core
// of its base64 encoding at each alignment.
func needles(canary string) []needle {
	c := []byte(canary)
	ns := []needle{
		{name: "plain", b: c},
		{name: "hex", b: []byte(hex.EncodeToString(c)), fold: true},
	}
	for _, enc := range []struct {
		name string
		e    *base64.Encoding
	}{{"std", base64.StdEncoding}, {"url", base64.URLEncoding}} {
		for off := range 3 {
			if core := base64Core(enc.e, c, off); len(core) >= 4 {
				ns = append(ns, needle{name: fmt.Sprintf("base64 (%s, offset %d)", enc.name, off), b: core})
			}
		}
	}
	return ns
}

// base64Core is the part of the base64 encoding of any x+canary+y with
// len(x)%3 == off that depends on the canary only: the characters of the
// 3-byte groups the canary fills completely.
func base64Core(enc *base64.Encoding, canary []byte, off int) []byte {
	lead := (3 - off) % 3 // canary bytes in the group shared with x
	if len(canary) < lead+3 {
		return nil
	}
	full := (len(canary) - lead) / 3 * 3
	return []byte(enc.EncodeToString(canary[lead : lead+full]))
}

// views of a text in which encoded canaries show as one of the needles:
// those of the text as it is and, if it has escapes, as they stand for (a
// dump in a log field has its line breaks escaped).
func views(text string) []view {
	raw := []byte(text)
	vs := derivedViews(raw, "")
	if unesc := unescapeAll(raw); !bytes.Equal(unesc, raw) {
		vs = append(vs, derivedViews(unesc, "escaped ")...)
	}
	return vs
}

func derivedViews(b []byte, prefix string) []view {
	text := string(b)
	vs := []view{
		{prefix + "text", b},
		{prefix + "lines wrapped", joinLines(b, false)},
		{prefix + "lines wrapped with indentation", joinLines(b, true)},
		{prefix + "text without white space", removeSpace(b)},
	}
	if prefix == "" {
		vs[0].name = "raw"
	}
	soup := hexSoup(text)
	vs = append(vs, view{prefix + "hex digits", []byte(soup)})
	for _, d := range [][]byte{dumpBytes(text), decodeHex(soup, 0), decodeHex(soup, 1)} {
		if len(d) > 0 {
			vs = append(vs, view{prefix + "hex dump", d}, view{prefix + "hex dump, escaped", unescapeAll(d)})
		}
	}
	vs = append(vs, view{prefix + "ASCII column of a dump", asciiColumns(text)})
	if d := decimalBytes(text); len(d) > 0 {
		vs = append(vs, view{prefix + "Go []byte", d})
	}
	if d := base64Runs(removeSpace(b)); len(d) > 0 {
		vs = append(vs, view{prefix + "base64-decoded text", d}, view{prefix + "base64-decoded text, escaped", unescapeAll(d)})
	}
	return vs
}

// unescapeAll undoes JSON, Go and shell escapes, up to three levels deep
// (a JSON string in a log field in a JSON log line).
func unescapeAll(b []byte) []byte {
	for range 3 {
		u := unescape(b)
		if bytes.Equal(u, b) {
			break
		}
		b = u
	}
	return b
}

var escapes = regexp.MustCompile(`\\(?:u[0-9a-fA-F]{4}|x[0-9a-fA-F]{2}|[0-7]{3}|[nrtbfv"'\\/])`)

func unescape(b []byte) []byte {
	return escapes.ReplaceAllFunc(b, func(m []byte) []byte {
		switch m[1] {
		case 'u':
			n, _ := strconv.ParseUint(string(m[2:]), 16, 32)
			return []byte(string(rune(n)))
		case 'x':
			n, _ := strconv.ParseUint(string(m[2:]), 16, 8)
			return []byte{byte(n)}
		case '0', '1', '2', '3', '4', '5', '6', '7':
			n, _ := strconv.ParseUint(string(m[1:]), 8, 8)
			return []byte{byte(n)}
		case 'n':
			return []byte{'\n'}
		case 'r':
			return []byte{'\r'}
		case 't':
			return []byte{'\t'}
		case 'b', 'f', 'v':
			return nil
		}
		return m[1:]
	})
}

// joinLines removes line breaks, and with indent the white space that
// starts the next line.
func joinLines(b []byte, indent bool) []byte {
	var out bytes.Buffer
	skipping := false
	for _, c := range b {
		switch {
		case c == '\n' || c == '\r':
			skipping = indent
			continue
		case skipping && (c == ' ' || c == '\t'):
			continue
		}
		skipping = false
		out.WriteByte(c)
	}
	return out.Bytes()
}

func removeSpace(b []byte) []byte {
	return bytes.Map(func(r rune) rune {
		if r == ' ' || r == '\t' || r == '\n' || r == '\r' {
			return -1
		}
		return r
	}, b)
}

// splitOverLines finds the canary cut in two: one line ends with its first
// part, the next holds the rest (after whatever prefix it has).
func splitOverLines(text, canary string) bool {
	lines := strings.Split(text, "\n")
	for i := 0; i+1 < len(lines); i++ {
		line := strings.TrimRight(lines[i], " \t\r")
		for k := 1; k < len(canary); k++ {
			if strings.HasSuffix(line, canary[:k]) && strings.Contains(lines[i+1], canary[k:]) {
				return true
			}
		}
	}
	return false
}

var (
	// An offset starting a dump line: "00000010  ", "00000010: ".
	dumpOffset = regexp.MustCompile(`^\s*[0-9a-fA-F]{4,16}:?\s+`)
	// The ASCII column of hexdump -C and hex.Dump: "|secret-canary.|".
	dumpASCII = regexp.MustCompile(`\s*\|[^|]*\|\s*$`)
	// A run of hex tokens as a dump line has them: "73 65 63" or "7365 6372".
	hexTokens = regexp.MustCompile(`^(?:[0-9a-fA-F]{2}(?:[0-9a-fA-F]{2}){0,3}(?:\s+|$))+`)
	// A hex digit pair, with the 0x or \x some formats put in front.
	hexDigits = regexp.MustCompile(`(?i)(?:0x|\\x)?[0-9a-f]`)
	// A value that may be base64 (either alphabet).
	base64Run = regexp.MustCompile(`[A-Za-z0-9+/_-]{16,}={0,2}`)
	// Go's %v of a []byte: [115 101 99].
	decimalList = regexp.MustCompile(`\[(\d{1,3}(?:[ ,]+\d{1,3}){3,})\]`)
)

// dumpBytes decodes the hex of dump lines (hexdump -C, xxd, hex.Dump):
// their offsets and ASCII columns dropped, their hex joined over lines.
func dumpBytes(text string) []byte {
	var hexs strings.Builder
	for _, line := range strings.Split(text, "\n") {
		loc := dumpOffset.FindStringIndex(line)
		if loc == nil {
			continue
		}
		rest := dumpASCII.ReplaceAllString(line[loc[1]:], "")
		// xxd writes its ASCII column after two spaces: the hex tokens end
		// at the first thing that is not one.
		toks := hexTokens.FindString(rest)
		hexs.WriteString(strings.Join(strings.Fields(toks), ""))
	}
	return decodeHex(hexs.String(), 0)
}

// hexSoup is every hex digit of the text in order: hex written
// continuously or with separators of any kind ("73:65:63", "0x73, 0x65",
// "\x73\x65") shows in it unbroken.
func hexSoup(text string) string {
	var digits strings.Builder
	for _, m := range hexDigits.FindAllString(text, -1) {
		digits.WriteByte(m[len(m)-1])
	}
	return strings.ToLower(digits.String())
}

func decodeHex(s string, start int) []byte {
	if len(s) <= start {
		return nil
	}
	s = s[start:]
	s = s[:len(s)/2*2]
	out, err := hex.DecodeString(s)
	if err != nil {
		return nil
	}
	return out
}

// asciiColumns joins the ASCII columns of a dump, where the canary shows
// cut at every 16 bytes.
func asciiColumns(text string) []byte {
	var out bytes.Buffer
	for _, line := range strings.Split(text, "\n") {
		if m := dumpASCII.FindString(line); m != "" {
			m = strings.TrimSpace(m)
			out.WriteString(m[1 : len(m)-1])
		}
	}
	return out.Bytes()
}

// decimalBytes decodes the byte lists Go's %v prints for a []byte.
func decimalBytes(text string) []byte {
	var out bytes.Buffer
	for _, m := range decimalList.FindAllStringSubmatch(text, -1) {
		for _, f := range strings.FieldsFunc(m[1], func(r rune) bool { return r == ' ' || r == ',' }) {
			n, err := strconv.Atoi(f)
			if err != nil || n > 255 {
				out.WriteByte(0)
				continue
			}
			out.WriteByte(byte(n))
		}
		out.WriteByte(0)
	}
	return out.Bytes()
}

// base64Runs decodes every run of base64 characters in the text (a value
// encoded twice, such as a Secret in a base64-encoded body, shows in it).
func base64Runs(b []byte) []byte {
	var out bytes.Buffer
	for _, run := range base64Run.FindAll(b, -1) {
		run = bytes.TrimRight(run, "=")
		if len(run)%4 == 1 {
			run = run[:len(run)-1]
		}
		for _, enc := range []*base64.Encoding{base64.RawStdEncoding, base64.RawURLEncoding} {
			if d, err := enc.DecodeString(string(run)); err == nil {
				out.Write(d)
				out.WriteByte(0)
				break
			}
		}
	}
	return out.Bytes()
}
