package harness

import (
	"encoding/json"
	"net/http"
	"strings"
)

// serveAdmin answers the admin endpoint:
//
//	GET    /_emulator/faults    the rules in force, with how often each fired
//	PUT    /_emulator/faults    replace them: {"rules": [...]}
//	POST   /_emulator/faults    add one rule: {...}
//	DELETE /_emulator/faults    remove all rules
//	GET    /_emulator/requests  request counts by route
//	DELETE /_emulator/requests  reset the request counts
//	GET    /_emulator/writes    the audit of every write (audit.go)
func (h *Harness) serveAdmin(w http.ResponseWriter, r *http.Request) {
	reply := func(status int, v any) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(v)
	}
	bad := func(err error) { reply(http.StatusBadRequest, map[string]string{"error": err.Error()}) }
	decode := func(v any) error {
		dec := json.NewDecoder(r.Body)
		dec.DisallowUnknownFields()
		return dec.Decode(v)
	}
	switch r.Method + " " + strings.TrimPrefix(r.URL.Path, AdminPrefix) {
	case "GET faults":
		reply(http.StatusOK, map[string]any{"rules": h.Rules()})
	case "PUT faults":
		var body struct {
			Rules []Rule `json:"rules"`
		}
		if err := decode(&body); err != nil {
			bad(err)
			return
		}
		if err := h.SetRules(body.Rules); err != nil {
			bad(err)
			return
		}
		reply(http.StatusOK, map[string]any{"rules": h.Rules()})
	case "POST faults":
		var rule Rule
		if err := decode(&rule); err != nil {
			bad(err)
			return
		}
		if err := h.AddRule(rule); err != nil {
			bad(err)
			return
		}
		reply(http.StatusCreated, map[string]any{"rules": h.Rules()})
	case "DELETE faults":
		_ = h.SetRules(nil)
		w.WriteHeader(http.StatusNoContent)
	case "GET requests":
		reply(http.StatusOK, h.Requests())
	case "DELETE requests":
		h.ResetRequests()
		w.WriteHeader(http.StatusNoContent)
	case "GET writes":
		reply(http.StatusOK, map[string]any{"writes": h.audit.Writes()})
	default:
		reply(http.StatusNotFound, map[string]string{"error": "unknown admin endpoint; see " + AdminPrefix + "faults, " + AdminPrefix + "requests and " + AdminPrefix + "writes"})
	}
}
