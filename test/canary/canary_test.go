package canary

import (
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand"
	"strconv"
	"strings"
	"testing"
)

const (
	simple = "cnry-7Qx2Lp9Vw4Zt"
	// special has what escapers change: quotes, HTML, a backslash, non-ASCII.
	special = `cn<ry&"q\x/ü-5Zt91`
)

// wrap cuts s into lines of width characters, each with prefix.
func wrap(s string, width int, prefix string) string {
	var b strings.Builder
	for len(s) > width {
		b.WriteString(prefix + s[:width] + "\n")
		s = s[width:]
	}
	b.WriteString(prefix + s + "\n")
	return b.String()
}

// xxd writes b as xxd does: "00000010: 7365 6372 6574 2d63 ...  secret-c".
func xxd(b []byte) string {
	var out strings.Builder
	for off := 0; off < len(b); off += 16 {
		line := b[off:min(off+16, len(b))]
		fmt.Fprintf(&out, "%08x: ", off)
		for i := 0; i < 16; i += 2 {
			switch {
			case i+1 < len(line):
				fmt.Fprintf(&out, "%02x%02x ", line[i], line[i+1])
			case i < len(line):
				fmt.Fprintf(&out, "%02x   ", line[i])
			default:
				out.WriteString("     ")
			}
		}
		out.WriteString(" ")
		for _, c := range line {
			if c < 32 || c > 126 {
				c = '.'
			}
			out.WriteByte(c)
		}
		out.WriteString("\n")
	}
	return out.String()
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// forms are the ways a secret gets written into a log.
func forms(c string) map[string]string {
	b64 := func(enc *base64.Encoding, prefix string) string {
		return enc.EncodeToString([]byte(prefix + c + "-tail"))
	}
	body := `{"kind":"Secret","data":{"token":"` + base64.StdEncoding.EncodeToString([]byte(c)) + `"}}`
	f := map[string]string{
		"plain":           "level=info msg=connecting token=" + c + " done",
		"JSON":            `{"level":"info","token":` + jsonString(c) + `}`,
		"JSON in JSON":    `{"msg":` + jsonString(`{"token":`+jsonString(c)+`}`) + `}`,
		"Go-quoted":       "token=" + strconv.Quote(c),
		"Go-quoted ASCII": "token=" + strconv.QuoteToASCII(c),
		"Go-quoted twice": "token=" + strconv.Quote(strconv.Quote(c)),
		"halves on lines": "I0101 12:00:00 part one " + c[:7] + "\nI0101 12:00:00 continued " + c[7:] + " end\n",
		"indented wrap":   wrap("token: "+c+" and more", 9, "    "),
		"hex":             "body=" + hex.EncodeToString([]byte(c)),
		"HEX":             "body=" + strings.ToUpper(hex.EncodeToString([]byte(c))),
		"hex with colons": "fp=" + strings.Join(strings.Split(hex.EncodeToString([]byte("x"+c)), ""), ":"),
		"0x bytes":        fmt.Sprintf("%#v", []byte(c)),
		"\\x escapes":     "raw=" + strconv.Quote(string(append([]byte{0xff}, c...))),
		"Go []byte":       fmt.Sprintf("data=map[token:%v]", []byte(c)),
		"hexdump of body": "Response Body:\n" + hex.Dump([]byte(body)),
		"base64 of body":  "body=" + base64.StdEncoding.EncodeToString([]byte(body)),
		"xxd of body":     xxd([]byte(body)),
		// client-go hex-dumps a protobuf body into a log field, whose
		// encoder escapes the dump's line breaks.
		"hexdump in a log field": `{"level":"debug","msg":"Response Body","body":` + jsonString(hex.Dump(append([]byte("k8s\x00\n\x0c\n\x02v1\x12\x06Secret\x12"), c...))) + `}`,
		"base64 76 cols":         wrap(base64.StdEncoding.EncodeToString([]byte(strings.Repeat("x", 70)+c)), 76, ""),
		"base64 indented":        wrap(base64.StdEncoding.EncodeToString([]byte("prefix:"+c)), 20, "\t\t"),
		"base64 no padding":      "v=" + base64.RawStdEncoding.EncodeToString([]byte("ab"+c)),
		"base64url":              "v=" + base64.RawURLEncoding.EncodeToString([]byte("?>"+c+"?>")),
	}
	for off := range 3 {
		p := strings.Repeat("P", off)
		f[fmt.Sprintf("base64 std offset %d", off)] = "v=" + b64(base64.StdEncoding, p)
		f[fmt.Sprintf("base64 url offset %d", off)] = "v=" + b64(base64.URLEncoding, p)
	}
	// Wrapped at every column, and hex-dumped at every offset within a line.
	for w := 1; w <= len(c)+2; w++ {
		f[fmt.Sprintf("wrapped at %d", w)] = wrap("xx "+c+" yy", w, "")
	}
	for off := range 17 {
		data := []byte(strings.Repeat("z", off) + c + "\n")
		f[fmt.Sprintf("hexdump -C offset %d", off)] = hex.Dump(data)
		f[fmt.Sprintf("xxd offset %d", off)] = xxd(data)
		f[fmt.Sprintf("upper hexdump offset %d", off)] = strings.ToUpper(hex.Dump(data))
	}
	return f
}

func TestEveryFormIsFound(t *testing.T) {
	for _, c := range []string{simple, special} {
		for name, text := range forms(c) {
			if _, found := Find(text, c); !found {
				t.Errorf("%q %s: not found in\n%s", c, name, text)
			}
		}
	}
}

func TestFindSaysWhichForm(t *testing.T) {
	for text, want := range map[string]string{
		"x " + simple:                    "plain",
		hex.Dump([]byte("..." + simple)): "hex dump",
		"t=" + base64.StdEncoding.EncodeToString([]byte("a"+simple)): "base64 (std, offset 1)",
	} {
		if form, _ := Find(text, simple); form != want {
			t.Errorf("form %q, want %q", form, want)
		}
	}
}

// unrelated is a log of the kind the scanner reads: lines, JSON, dumps and
// encodings, of everything but the canaries.
func unrelated() string {
	rng := rand.New(rand.NewSource(1))
	var b strings.Builder
	randomBytes := func(n int) []byte {
		p := make([]byte, n)
		rng.Read(p)
		return p
	}
	for i := range 300 {
		fmt.Fprintf(&b, `{"level":"info","ts":%d,"logger":"machine","msg":"Reconciling","Machine":{"name":"worker-%d","namespace":"openshift-machine-api"},"reconcileID":"%x"}`+"\n", 1700000000+i, i, randomBytes(16))
		fmt.Fprintf(&b, "I0101 12:00:%02d.%06d  %d request.go:1212] Response Body: %s\n", i%60, i, i, base64.StdEncoding.EncodeToString(randomBytes(40)))
		if i%10 == 0 {
			b.WriteString(hex.Dump(randomBytes(100)))
			b.WriteString(xxd(randomBytes(50)))
			fmt.Fprintf(&b, "data=%v\n", randomBytes(20))
		}
	}
	// Near misses: the canaries cut short, or with one character changed.
	fmt.Fprintf(&b, "%s %s %s\n", simple[:len(simple)-1], simple[1:], strings.Replace(simple, "Q", "q", 1))
	fmt.Fprintf(&b, "%s\n", base64.StdEncoding.EncodeToString([]byte(simple[:len(simple)-3])))
	return b.String()
}

func TestUnrelatedTextIsClean(t *testing.T) {
	text := unrelated()
	if got := Scan(text, simple, special, "another-canary-Zk81Qm", "tok_9f8e7d6c5b4a3f2e"); len(got) != 0 {
		t.Errorf("found %v in a text without them", got)
	}
}

func TestScanFindsEachCanary(t *testing.T) {
	text := unrelated() + "x " + simple + "\n" + hex.Dump([]byte(`{"t":"`+special+`"}`))
	got := Scan(text, simple, special, "absent-canary-Qw83Lz")
	if len(got) != 2 || got[0].Canary != simple || got[1].Canary != special {
		t.Errorf("got %v, want both planted canaries and not the absent one", got)
	}
}

func TestScanExcerptsFindsPieces(t *testing.T) {
	const c = "Q7vX2mLp9RtK4wZs8NcB"
	for _, text := range []string{
		"parse error near '" + c[3:15] + "'",
		`{"msg":"invalid credentials \u0027` + c[8:20] + `\u0027"}`,
	} {
		if f := ScanExcerpts(text, 10, c); len(f) != 1 {
			t.Errorf("ScanExcerpts(%q) = %v, want the piece", text, f)
		}
	}
	if f := ScanExcerpts("parse error near '"+c[3:12]+"'", 10, c); len(f) != 0 {
		t.Errorf("a piece shorter than the minimum was reported: %v", f)
	}
	if f := ScanExcerpts(unrelated(), 10, c); len(f) != 0 {
		t.Errorf("unrelated text: %v", f)
	}
}
