package userdata

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
)

// maxDataURLContent bounds what a data URL of user data may decode to: the
// clouds take at most 64 KiB of user data, so anything larger is hostile.
const maxDataURLContent = 1 << 20

// DecodeDataURL decodes an RFC 2397 data URL ("data:[<type>][;base64],<data>"),
// as Ignition reads a file's or a config's source: the data percent-decoded,
// or base64 when the URL says so. compression "gzip" (Ignition 3.1's
// contents.compression) gunzips the result; "" leaves it. ok is false for a
// source that is no data URL (fetched at boot: unknown here).
func DecodeDataURL(source, compression string) (data []byte, ok bool, err error) {
	rest, found := strings.CutPrefix(source, "data:")
	if !found {
		return nil, false, nil
	}
	meta, payload, found := strings.Cut(rest, ",")
	if !found {
		return nil, true, errors.New("a data URL without a comma")
	}
	if len(payload) > 2*maxDataURLContent {
		return nil, true, errors.New("a data URL longer than user data can be")
	}
	if strings.HasSuffix(meta, ";base64") {
		unescaped, err := url.PathUnescape(payload)
		if err != nil {
			return nil, true, fmt.Errorf("a data URL: %w", err)
		}
		data, err = base64.StdEncoding.DecodeString(unescaped)
		if err != nil {
			return nil, true, fmt.Errorf("a base64 data URL: %w", err)
		}
	} else {
		s, err := url.PathUnescape(payload)
		if err != nil {
			return nil, true, fmt.Errorf("a data URL: %w", err)
		}
		data = []byte(s)
	}
	switch compression {
	case "":
		return data, true, nil
	case "gzip":
		r, err := gzip.NewReader(bytes.NewReader(data))
		if err != nil {
			return nil, true, fmt.Errorf("gzip contents: %w", err)
		}
		out, err := io.ReadAll(io.LimitReader(r, maxDataURLContent+1))
		if err != nil {
			return nil, true, fmt.Errorf("gzip contents: %w", err)
		}
		if len(out) > maxDataURLContent {
			return nil, true, errors.New("gzip contents larger than user data can be")
		}
		return out, true, nil
	}
	return nil, true, fmt.Errorf("compression %q, which Ignition does not know", compression)
}
