package cloudscale

import (
	"net/url"
	"strings"
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
		if other := e.world.customImageBySlug(req.Slug); other != nil && other != img {
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

// createImport pretends to download the image: the import is "in_progress"
// for the boot time, then "success". Nothing is fetched from the URL.
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
	if req.Slug != "" && e.world.customImageBySlug(req.Slug) != nil {
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
	if r := validTags(req.Tags); r != nil {
		return *r
	}
	img := &customImage{
		meta: e.newMeta(tagsOrEmpty(req.Tags)), Name: req.Name, Slug: req.Slug, SizeGB: 10, UserDataHandling: req.UserDataHandling,
		FirmwareType: req.FirmwareType, Zones: req.Zones, Checksums: map[string]string{},
	}
	if img.Slug == "" {
		img.Slug = strings.ToLower(strings.ReplaceAll(req.Name, " ", "-"))
	}
	e.world.CustomImages[img.UUID] = img
	// The real API gives an import the UUID of the image it makes.
	imp := &customImageImport{meta: e.newMeta(tagsOrEmpty(req.Tags)), URL: req.URL, CustomImage: img.UUID, Status: "success"}
	imp.UUID = img.UUID
	if e.cfg.BootTime > 0 {
		imp.Status, imp.Pending = "in_progress", &pending{To: "success", At: c.now.Add(e.cfg.BootTime)}
	}
	e.world.Imports[imp.UUID] = imp
	return created(e.renderImport(c, imp))
}

func (e *Emulator) listImports(c *call) reply {
	return list(c, e.world.Imports, func(*customImageImport) string { return "" }, e.renderImport)
}

func (e *Emulator) renderImport(c *call, imp *customImageImport) map[string]any {
	stub := map[string]string{"href": c.href("custom-images", imp.CustomImage), "uuid": imp.CustomImage, "name": ""}
	if img := e.world.CustomImages[imp.CustomImage]; img != nil {
		stub["name"] = img.Name
	}
	return map[string]any{
		"href": c.href("custom-images/import", imp.UUID), "uuid": imp.UUID, "url": imp.URL,
		"custom_image": stub, "status": imp.Status, "error_message": imp.ErrorMessage, "tags": imp.Tags,
	}
}
