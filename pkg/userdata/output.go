package userdata

import "encoding/json"

// isJSON says whether user data is JSON (an Ignition config) and so passes
// through untouched. Leading and trailing white space count as JSON's.
func isJSON(raw []byte) bool { return json.Valid(raw) }

// userData turns a template's JSON output into user data: a string is used
// as it is (cloud-config, a script), anything else as compact JSON.
func userData(out []byte, maxBytes int) ([]byte, error) {
	var s string
	if err := json.Unmarshal(out, &s); err == nil {
		if len(s) > maxBytes {
			return nil, outputTooLarge(len(s), maxBytes)
		}
		return []byte(s), nil
	}
	// Marshalling a RawMessage compacts it the way the provider always has
	// (HTML characters escaped), so rendered user data stays byte-identical.
	compact, err := json.Marshal(json.RawMessage(out))
	if err != nil {
		return nil, outputError("the user data template's result is not JSON")
	}
	if len(compact) > maxBytes {
		return nil, outputTooLarge(len(compact), maxBytes)
	}
	return compact, nil
}

func outputTooLarge(n, maxBytes int) *Error {
	return outputError("the rendered user data is %d bytes, more than the %s allowed", n, formatBytes(int64(maxBytes)))
}
