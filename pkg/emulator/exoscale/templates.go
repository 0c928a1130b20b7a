package exoscale

import (
	"context"
	"crypto/md5"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/appuio/machine-api-provider/pkg/emulator/imagefetch"
)

// Public templates are Exoscale's, listed in every zone; private ones are an
// account's, registered in one zone (from a URL and its MD5 checksum, as
// RHCOS is uploaded) and copied to others. A registration downloads the
// file (Config.ImageClient) and stays pending until the download has ended
// and the operation time has passed; it fails when the file cannot be
// fetched or its MD5 is not the checksum given (or an OperationFailure
// says so), and the template is gone then. Without a size the template
// needs the disk a qcow2's header names.

var templateFields = map[string]fieldDoc{
	"name":             {"Template name", "a String of 1 to 255 characters"},
	"url":              {"Template source URL", "an http or https URL"},
	"checksum":         {"Template MD5 checksum", "a String of 32 hexadecimal digits"},
	"ssh-key-enabled":  {"Enable SSH key-based login", "a Boolean"},
	"password-enabled": {"Enable password-based login", "a Boolean"},
	"boot-mode":        {"Boot mode (default: legacy)", "one of legacy, uefi"},
	"size":             {"Template size", "a positive Integer"},
	"description":      {"Template description", "a String of at most 255 characters"},
	"default-user":     {"Template default user", "a String of 1 to 255 characters"},
	"build":            {"Template build", "a String of 1 to 255 characters"},
	"version":          {"Template version", "a String of 1 to 255 characters"},
	"maintainer":       {"Template maintainer", "a String of 1 to 255 characters"},
	"target-zone":      {"Target Zone name", "an Object with the name of a zone"},
	"application-consistent-snapshot-enabled": {"Template with support for Application Consistent Snapshots", "a Boolean"},
}

type registerTemplateRequest struct {
	Name            *string `json:"name"`
	URL             *string `json:"url"`
	Checksum        *string `json:"checksum"`
	SSHKeyEnabled   *bool   `json:"ssh-key-enabled"`
	PasswordEnabled *bool   `json:"password-enabled"`
	BootMode        *string `json:"boot-mode"`
	Size            *int64  `json:"size"`
	Description     *string `json:"description"`
	DefaultUser     *string `json:"default-user"`
	Build           *string `json:"build"`
	Version         *string `json:"version"`
	Maintainer      *string `json:"maintainer"`
	AppSnapshots    *bool   `json:"application-consistent-snapshot-enabled"`
}

func validMD5(s string) bool {
	if len(s) != 32 {
		return false
	}
	for _, r := range s {
		if !(r >= '0' && r <= '9' || r >= 'a' && r <= 'f' || r >= 'A' && r <= 'F') {
			return false
		}
	}
	return true
}

func optionalString(p *string, min, max int) bool {
	return p == nil || (len(*p) >= min && len(*p) <= max)
}

func (e *Emulator) registerTemplate(c *call) reply {
	var req registerTemplateRequest
	if r := c.decode(&req, templateFields); r != nil {
		return *r
	}
	invalid := func(f string) reply { return templateFields[f].invalid(f) }
	switch {
	case req.Name == nil || !optionalString(req.Name, 1, 255):
		return invalid("name")
	case req.URL == nil || !validURL(*req.URL):
		return invalid("url")
	case req.Checksum == nil || !validMD5(*req.Checksum):
		return invalid("checksum")
	case req.SSHKeyEnabled == nil:
		return invalid("ssh-key-enabled")
	case req.PasswordEnabled == nil:
		return invalid("password-enabled")
	case req.BootMode != nil && *req.BootMode != "legacy" && *req.BootMode != "uefi":
		return invalid("boot-mode")
	case req.Size != nil && *req.Size <= 0:
		return invalid("size")
	case !optionalString(req.Description, 0, 255):
		return invalid("description")
	case !optionalString(req.DefaultUser, 1, 255):
		return invalid("default-user")
	case !optionalString(req.Build, 1, 255):
		return invalid("build")
	case !optionalString(req.Version, 1, 255):
		return invalid("version")
	case !optionalString(req.Maintainer, 1, 255):
		return invalid("maintainer")
	}
	if r := c.checkQuota("template", int64(len(c.acct.Templates))+1); r != nil {
		return *r
	}
	t := &template{
		meta:            e.newMeta(),
		Zone:            c.zone,
		Name:            *req.Name,
		URL:             *req.URL,
		Checksum:        *req.Checksum,
		SSHKeyEnabled:   *req.SSHKeyEnabled,
		PasswordEnabled: *req.PasswordEnabled,
		BootMode:        "legacy",
		// until the download says (the size of Exoscale's own)
		Size:         10 * gib,
		AppSnapshots: req.AppSnapshots != nil && *req.AppSnapshots,
	}
	set := func(dst *string, src *string) {
		if src != nil {
			*dst = *src
		}
	}
	set(&t.BootMode, req.BootMode)
	set(&t.Description, req.Description)
	set(&t.DefaultUser, req.DefaultUser)
	set(&t.Build, req.Build)
	set(&t.Version, req.Version)
	set(&t.Maintainer, req.Maintainer)
	if req.Size != nil {
		t.Size = *req.Size
	}
	c.acct.Templates[t.ID] = t
	op := c.operation("register-template", "template", t.ID, c.now)
	// An injected failure decides without a download.
	if op.Failure == nil {
		op.Fetching = true
		e.startFetch(c.acct.Name, op.ID, t.ID, t.URL, t.Checksum, req.Size == nil)
	}
	return c.opReply(op)
}

// startFetch downloads a registration's file in the background and
// records the outcome on its operation, which then ends at its time.
func (e *Emulator) startFetch(acct, opID, tplID, src, checksum string, sizeFromFile bool) {
	go func() {
		res := imagefetch.Fetch(context.Background(), e.cfg.ImageClient, src)
		e.mu.Lock()
		defer e.mu.Unlock()
		a := e.world.Accounts[acct]
		if a == nil || a.Operations[opID] == nil {
			return
		}
		op := a.Operations[opID]
		op.Fetching = false
		fail := func(msg string) {
			if op.Failure == nil {
				op.Failure = &opFailure{Reason: "incorrect", Message: msg}
			}
		}
		switch {
		case res.Err != nil:
			fail(fmt.Sprintf("template %s could not be downloaded from %s: %v", tplID, src, res.Err))
		case !strings.EqualFold(res.MD5, checksum):
			fail(fmt.Sprintf("template %s: checksum mismatch: the file at %s has MD5 %s, not %s", tplID, src, res.MD5, strings.ToLower(checksum)))
		case sizeFromFile:
			if t := a.Templates[tplID]; t != nil {
				t.Size = res.VirtualSize
			}
		}
		e.saveLocked()
	}()
}

func validURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}

// findTemplate looks up a template the account sees in the call's zone:
// public, or its own registered there.
func (c *call) findTemplate() (*publicTemplate, *template, *reply) {
	id := c.params["id"]
	if p := findPublicTemplate(id); p != nil {
		return p, nil, nil
	}
	t := c.acct.Templates[id]
	if t == nil || t.Zone != c.zone {
		r := notFound("Template", id)
		return nil, nil, &r
	}
	return nil, t, nil
}

func (e *Emulator) getTemplate(c *call) reply {
	p, t, r := c.findTemplate()
	if r != nil {
		return *r
	}
	if p != nil {
		return ok(renderPublicTemplate(p))
	}
	return ok(renderTemplate(t))
}

func (e *Emulator) listTemplates(c *call) reply {
	q := c.r.URL.Query()
	// Without a visibility, Exoscale's own templates are listed: the API's
	// default, as the SDK's previous major version documents it.
	vis := q.Get("visibility")
	if vis == "" {
		vis = "public"
	}
	if vis != "public" && vis != "private" {
		return badRequest("Invalid value in visibility - should be one of private, public")
	}
	family := q.Get("family")
	out := []any{}
	if vis == "public" {
		for i := range publicTemplates {
			if family == "" || publicTemplates[i].Family == family {
				out = append(out, renderPublicTemplate(&publicTemplates[i]))
			}
		}
	} else if family == "" {
		for _, t := range sorted(c.acct.Templates) {
			if t.Zone == c.zone {
				out = append(out, renderTemplate(t))
			}
		}
	}
	return ok(map[string]any{"templates": out})
}

func (e *Emulator) updateTemplate(c *call) reply {
	p, t, r := c.findTemplate()
	if r != nil {
		return *r
	}
	var req struct {
		Name        *string `json:"name"`
		Description *string `json:"description"`
	}
	if r := c.decode(&req, templateFields); r != nil {
		return *r
	}
	if !optionalString(req.Name, 1, 255) {
		return templateFields["name"].invalid("name")
	}
	if !optionalString(req.Description, 0, 255) {
		return templateFields["description"].invalid("description")
	}
	if p != nil {
		return message(http.StatusForbidden, "Template %s is public: only private templates can be changed", p.ID)
	}
	if req.Name != nil {
		t.Name = *req.Name
	}
	if req.Description != nil {
		t.Description = *req.Description
	}
	return c.opReply(c.operation("update-template", "template", t.ID, c.now))
}

func (e *Emulator) copyTemplate(c *call) reply {
	p, t, r := c.findTemplate()
	if r != nil {
		return *r
	}
	var req struct {
		TargetZone *nameRef `json:"target-zone"`
	}
	if r := c.decode(&req, templateFields); r != nil {
		return *r
	}
	if req.TargetZone == nil || !zoneExists(req.TargetZone.Name) {
		return templateFields["target-zone"].invalid("target-zone")
	}
	if p != nil {
		return message(http.StatusForbidden, "Template %s is public: it is in every zone already", p.ID)
	}
	if req.TargetZone.Name == t.Zone {
		return refused("target-zone", "the template is in zone %s already", t.Zone)
	}
	if r := c.checkQuota("template", int64(len(c.acct.Templates))+1); r != nil {
		return *r
	}
	cp := *t
	cp.meta = e.newMeta()
	cp.Zone = req.TargetZone.Name
	c.acct.Templates[cp.ID] = &cp
	op := c.operation("copy-template", "template", cp.ID, c.now)
	op.RefZone = cp.Zone
	return c.opReply(op)
}

func (e *Emulator) deleteTemplate(c *call) reply {
	p, t, r := c.findTemplate()
	if r != nil {
		return *r
	}
	if p != nil {
		return message(http.StatusForbidden, "Template %s is public: only private templates can be deleted", p.ID)
	}
	delete(c.acct.Templates, t.ID)
	return c.opReply(c.operation("delete-template", "template", t.ID, c.now))
}

func renderPublicTemplate(p *publicTemplate) map[string]any {
	return map[string]any{
		"id":               p.ID,
		"name":             p.Name,
		"description":      "",
		"family":           p.Family,
		"default-user":     p.DefaultUser,
		"size":             publicTemplateSize,
		"password-enabled": true,
		"ssh-key-enabled":  true,
		"boot-mode":        "legacy",
		"version":          p.Version,
		"build":            p.Created.Format("2006-01-02"),
		"maintainer":       "Exoscale",
		"visibility":       "public",
		"zones":            Zones,
		"created-at":       p.Created,
		"application-consistent-snapshot-enabled": false,
	}
}

func renderTemplate(t *template) map[string]any {
	m := map[string]any{
		"id":               t.ID,
		"name":             t.Name,
		"url":              t.URL,
		"checksum":         t.Checksum,
		"size":             t.Size,
		"password-enabled": t.PasswordEnabled,
		"ssh-key-enabled":  t.SSHKeyEnabled,
		"boot-mode":        t.BootMode,
		"visibility":       "private",
		"zones":            []string{t.Zone},
		"created-at":       t.CreatedAt,
		"application-consistent-snapshot-enabled": t.AppSnapshots,
	}
	for k, v := range map[string]string{"description": t.Description, "default-user": t.DefaultUser, "build": t.Build, "version": t.Version, "maintainer": t.Maintainer} {
		if v != "" {
			m[k] = v
		}
	}
	return m
}

// seedTemplate registers a TemplateSeed in each of its zones, with IDs
// derived from account, zone and name so they survive a restart without a
// state file.
func (e *Emulator) seedTemplate(s TemplateSeed) error {
	acct := s.Account
	if acct == "" {
		acct = e.accounts[0].Name
	}
	a := e.world.Accounts[acct]
	if a == nil {
		return fmt.Errorf("template %q: no account %q", s.Name, acct)
	}
	if s.Name == "" {
		return fmt.Errorf("template seed without a name")
	}
	zones := s.Zones
	if len(zones) == 0 {
		zones = Zones
	}
	if s.BootMode == "" {
		s.BootMode = "legacy"
	}
	if s.SizeGiB == 0 {
		s.SizeGiB = 16
	}
	for _, z := range zones {
		if !slices.Contains(Zones, z) {
			return fmt.Errorf("template %q: no zone %q", s.Name, z)
		}
		t := &template{
			meta:            e.newMeta(),
			Zone:            z,
			Name:            s.Name,
			Description:     s.Description,
			URL:             "https://templates.emulator.invalid/" + url.PathEscape(s.Name) + ".qcow2",
			Checksum:        fmt.Sprintf("%x", md5.Sum([]byte(s.Name))),
			DefaultUser:     s.DefaultUser,
			BootMode:        s.BootMode,
			Size:            s.SizeGiB * gib,
			SSHKeyEnabled:   true,
			PasswordEnabled: false,
		}
		t.ID = nameUUID("template", acct+"/"+z+"/"+s.Name)
		a.Templates[t.ID] = t
	}
	return nil
}
