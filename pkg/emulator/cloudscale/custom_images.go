package cloudscale

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"github.com/appuio/machine-api-provider/pkg/emulator/imagefetch"
)

func (e *Emulator) seedCustomImage(s CustomImageSeed) {
	handling := s.UserDataHandling
	if handling == "" {
		handling = "pass-through"
	}
	img := &customImage{
		meta: e.newMeta(nil), Name: s.Name, Slug: s.Slug, SizeGB: 16, UserDataHandling: handling,
		FirmwareType: "uefi", Zones: append([]string{}, s.Zones...), Checksums: map[string]string{},
	}
	e.world.CustomImages[img.UUID] = img
}

func (w *world) customImageBySlug(slug string) *customImage {
	for _, img := range w.CustomImages {
		if img.Slug == slug {
			return img
		}
	}
	return nil
}

func (e *Emulator) listCustomImages(c *call) reply {
	return list(c, e.world.CustomImages, func(i *customImage) string { return i.Name }, e.renderCustomImage)
}

type customImageRequest struct {
	Name             string             `json:"name"`
	Slug             string             `json:"slug"`
	UserDataHandling string             `json:"user_data_handling"`
	Tags             *map[string]string `json:"tags"`
}

func checkUserDataHandling(h string) *reply {
	if h != "pass-through" && h != "extend-cloud-config" {
		r := invalid("user_data_handling", "Must be \"pass-through\" or \"extend-cloud-config\".")
		return &r
	}
	return nil
}

func (e *Emulator) updateCustomImage(c *call) reply {
	img, r := find(c, e.world.CustomImages)
	if r != nil {
		return *r
	}
	var req customImageRequest
	set, r := c.patch(&req, false)
	if r != nil {
		return *r
	}
	if set["user_data_handling"] {
		if r := checkUserDataHandling(req.UserDataHandling); r != nil {
			return *r
		}
	}
	if set["slug"] {
		if other := e.world.customImageBySlug(req.Slug); (other != nil && other != img) || (other == nil && e.world.slugTaken(req.Slug)) {
			return invalid("slug", "Another custom image has the slug %q.", req.Slug)
		}
	}
	if r := validTags(req.Tags); r != nil {
		return *r
	}
	if set["name"] {
		img.Name = req.Name
	}
	if set["slug"] {
		img.Slug = req.Slug
	}
	if set["user_data_handling"] {
		img.UserDataHandling = req.UserDataHandling
	}
	img.setTags(req.Tags)
	return noContent
}

func (e *Emulator) deleteCustomImage(c *call) reply {
	img, r := find(c, e.world.CustomImages)
	if r != nil {
		return *r
	}
	delete(e.world.CustomImages, img.UUID)
	return noContent
}

func (e *Emulator) renderCustomImage(c *call, img *customImage) map[string]any {
	return map[string]any{
		"href": c.href("custom-images", img.UUID), "uuid": img.UUID, "name": img.Name, "slug": img.Slug,
		"size_gb": img.SizeGB, "checksums": img.Checksums, "user_data_handling": img.UserDataHandling,
		"firmware_type": img.FirmwareType, "zones": zoneStubs(img.Zones), "created_at": img.CreatedAt, "tags": img.Tags,
	}
}

type importRequest struct {
	URL              string             `json:"url"`
	Name             string             `json:"name"`
	Slug             string             `json:"slug"`
	UserDataHandling string             `json:"user_data_handling"`
	FirmwareType     string             `json:"firmware_type"`
	SourceFormat     string             `json:"source_format"`
	Zones            []string           `json:"zones"`
	Tags             *map[string]string `json:"tags"`
}

// sourceFormats are the formats an import may name (the vendor's Terraform
// provider and SDK suite use raw; the OpenShift install guides qcow2).
var sourceFormats = []string{"raw", "qcow2"}

// createImport starts an import: the image is downloaded from the URL (by
// Config.ImageClient), and the import is "in_progress" until the download
// has ended and the processing time (BootTime) has passed; then "success",
// and the custom image, with the file's checksums and the size it needs,
// is listed; or "failed" with the reason in error_message, and no image.
func (e *Emulator) createImport(c *call) reply {
	var req importRequest
	if r := c.decode(&req); r != nil {
		return *r
	}
	u, err := url.Parse(req.URL)
	if req.URL == "" || err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return invalid("url", "Enter a valid http or https URL.")
	}
	if req.Name == "" {
		return invalid("name", "This field is required.")
	}
	if req.UserDataHandling == "" {
		req.UserDataHandling = "pass-through"
	}
	if r := checkUserDataHandling(req.UserDataHandling); r != nil {
		return *r
	}
	if req.SourceFormat == "" {
		req.SourceFormat = "raw"
	}
	if !contains(sourceFormats, req.SourceFormat) {
		return invalid("source_format", "Must be one of: %s.", strings.Join(sourceFormats, ", "))
	}
	if req.Slug != "" && e.world.slugTaken(req.Slug) {
		return invalid("slug", "Another custom image has the slug %q.", req.Slug)
	}
	if len(req.Zones) == 0 {
		req.Zones = []string{defaultZone}
	}
	for _, z := range req.Zones {
		if !zoneExists(z) {
			return invalid("zones", "Zone %q does not exist.", z)
		}
	}
	if req.FirmwareType == "" {
		req.FirmwareType = "bios"
	}
	if req.FirmwareType != "bios" && req.FirmwareType != "uefi" {
		return invalid("firmware_type", "Must be \"bios\" or \"uefi\".")
	}
	if r := validTags(req.Tags); r != nil {
		return *r
	}
	img := &customImage{
		meta: e.newMeta(tagsOrEmpty(req.Tags)), Name: req.Name, Slug: req.Slug, UserDataHandling: req.UserDataHandling,
		FirmwareType: req.FirmwareType, Zones: req.Zones, Checksums: map[string]string{},
	}
	if img.Slug == "" {
		img.Slug = strings.ToLower(strings.ReplaceAll(req.Name, " ", "-"))
	}
	e.world.Importing[img.UUID] = img
	// The real API gives an import the UUID of the image it makes.
	imp := &customImageImport{
		meta: e.newMeta(tagsOrEmpty(req.Tags)), URL: req.URL, SourceFormat: req.SourceFormat, CustomImage: img.UUID,
		Status: "in_progress", Pending: &pending{To: "success", At: c.now.Add(e.cfg.BootTime)},
	}
	imp.UUID = img.UUID
	e.world.Imports[imp.UUID] = imp
	e.startFetch(imp)
	return created(e.renderImport(c, imp))
}

// slugTaken: a listed image or one being imported has the slug.
func (w *world) slugTaken(slug string) bool {
	if w.customImageBySlug(slug) != nil {
		return true
	}
	for _, img := range w.Importing {
		if img.Slug == slug {
			return true
		}
	}
	return false
}

// startFetch downloads the import's image in the background and records
// what it found; the import ends at the next request after that (settle).
func (e *Emulator) startFetch(imp *customImageImport) {
	id, src, format := imp.UUID, imp.URL, imp.SourceFormat
	go func() {
		res := imagefetch.Fetch(context.Background(), e.cfg.ImageClient, src)
		e.mu.Lock()
		defer e.mu.Unlock()
		imp := e.world.Imports[id]
		if imp == nil {
			return
		}
		imp.Fetched = true
		switch {
		case res.Err != nil:
			imp.FetchError = res.Err.Error()
		case res.Format != format:
			imp.FetchError = fmt.Sprintf("The image is not in the %s format (it is %s).", format, res.Format)
		}
		if img := e.world.Importing[id]; img != nil && imp.FetchError == "" {
			img.Checksums = map[string]string{"md5": res.MD5, "sha256": res.SHA256}
			img.SizeGB = int((res.VirtualSize + gib - 1) / gib)
			img.SizeGB = max(img.SizeGB, 1)
		}
		e.saveLocked()
	}()
}

const gib = 1 << 30

func (e *Emulator) listImports(c *call) reply {
	return list(c, e.world.Imports, func(*customImageImport) string { return "" }, e.renderImport)
}

func (e *Emulator) renderImport(c *call, imp *customImageImport) map[string]any {
	stub := map[string]string{"href": c.href("custom-images", imp.CustomImage), "uuid": imp.CustomImage, "name": ""}
	if img := e.world.CustomImages[imp.CustomImage]; img != nil {
		stub["name"] = img.Name
	} else if img := e.world.Importing[imp.CustomImage]; img != nil {
		stub["name"] = img.Name
	}
	return map[string]any{
		"href": c.href("custom-images/import", imp.UUID), "uuid": imp.UUID, "url": imp.URL,
		"custom_image": stub, "status": imp.Status, "error_message": imp.ErrorMessage, "tags": imp.Tags,
	}
}
