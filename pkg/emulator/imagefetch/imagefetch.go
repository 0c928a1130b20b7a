// Package imagefetch downloads a disk image from a URL, as a cloud does when
// it imports a custom image or registers a template: it reads the whole
// file, computes the checksums the clouds report or check (MD5, SHA-256) and
// the size a disk needs to hold it (a qcow2's virtual size from its header,
// a raw image's length). Both emulators use it, so that an import of the
// wrong file, a file that is not there or a checksum that does not match
// fails there as it fails on the cloud.
//
// Nothing is kept: the image streams through the hashes.
package imagefetch

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"time"
)

// Result is what a download found.
type Result struct {
	// Status is the HTTP status of the answer (0 when there was none).
	Status int
	// Bytes is the file's length.
	Bytes int64
	// MD5 and SHA256 are the file's checksums, lower-case hexadecimal.
	MD5, SHA256 string
	// Format is "qcow2" when the file starts with the qcow2 magic, else
	// "raw".
	Format string
	// VirtualSize is the size of the disk the image holds: a qcow2's from
	// its header, a raw image's length.
	VirtualSize int64
	// Err is why there is no image: the request failed, the answer was not
	// 200, or the body broke off.
	Err error
}

// qcow2Magic starts every qcow2 file ("QFI\xfb"); its header holds the
// virtual size at bytes 24-31, big-endian (QEMU's docs/interop/qcow2.txt).
var qcow2Magic = []byte{'Q', 'F', 'I', 0xfb}

// DefaultTimeout bounds a download of the emulators' default client.
const DefaultTimeout = 30 * time.Minute

// DefaultClient is the client of an emulator configured with none.
var DefaultClient = &http.Client{Timeout: DefaultTimeout}

// Fetch downloads url with client (nil: DefaultClient).
func Fetch(ctx context.Context, client *http.Client, url string) Result {
	if client == nil {
		client = DefaultClient
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return Result{Err: err}
	}
	resp, err := client.Do(req)
	if err != nil {
		return Result{Err: err}
	}
	defer resp.Body.Close()
	r := Result{Status: resp.StatusCode}
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
		r.Err = statusError(resp.StatusCode)
		return r
	}
	m, s := md5.New(), sha256.New()
	head := &headWriter{max: 32}
	n, err := io.Copy(io.MultiWriter(m, s, head), resp.Body)
	if err != nil {
		r.Err = fmt.Errorf("the download broke off after %d bytes: %w", n, err)
		return r
	}
	r.Bytes, r.MD5, r.SHA256 = n, hex.EncodeToString(m.Sum(nil)), hex.EncodeToString(s.Sum(nil))
	r.Format, r.VirtualSize = "raw", n
	if len(head.b) >= 32 && string(head.b[:4]) == string(qcow2Magic) {
		r.Format = "qcow2"
		r.VirtualSize = int64(binary.BigEndian.Uint64(head.b[24:32]))
	}
	return r
}

// statusError is an answer other than 200, in the words cloudscale.ch's
// import uses (its SDK's integration suite expects them).
type statusError int

func (s statusError) Error() string { return fmt.Sprintf("Expected HTTP 200, got HTTP %d", int(s)) }

// headWriter keeps the first max bytes written to it.
type headWriter struct {
	b   []byte
	max int
}

func (h *headWriter) Write(p []byte) (int, error) {
	if room := h.max - len(h.b); room > 0 {
		h.b = append(h.b, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

// FakeQCOW2 returns a small file that passes for a qcow2 image of
// virtualSize bytes: the magic, version 3 and the virtual size in the
// header, then payload (so that images of different contents have
// different checksums). Tests, the demo and the benchmark serve it.
func FakeQCOW2(virtualSize int64, payload string) []byte {
	b := make([]byte, 104)
	copy(b, qcow2Magic)
	binary.BigEndian.PutUint32(b[4:8], 3)
	binary.BigEndian.PutUint64(b[24:32], uint64(virtualSize))
	return append(b, payload...)
}

// Mirror is an http.RoundTripper answering GETs of fixed URLs from memory
// (404 for any other): an emulator given a client with it downloads without
// a network, as the SDK's own suite expects of a URL on the internet.
type Mirror map[string][]byte

// RoundTrip answers req from the map.
func (m Mirror) RoundTrip(req *http.Request) (*http.Response, error) {
	body, ok := m[req.URL.String()]
	status := http.StatusOK
	if !ok || req.Method != http.MethodGet {
		status, body = http.StatusNotFound, []byte("not found")
	}
	return &http.Response{
		StatusCode: status, Status: http.StatusText(status), Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{"Content-Type": {"application/octet-stream"}}, ContentLength: int64(len(body)),
		Body: io.NopCloser(bytes.NewReader(body)), Request: req,
	}, nil
}
