package exoscale

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	v3 "github.com/exoscale/egoscale/v3"
	machinev1 "github.com/openshift/api/machine/v1beta1"

	"github.com/appuio/machine-api-provider/api/exoscale/v1beta1"
	"github.com/appuio/machine-api-provider/pkg/cloud"
)

// Boot images on Exoscale are private templates, one per zone: registered
// in the first zone from a URL with the file's MD5 (boot mode uefi, default
// user core, SSH keys on, passwords off), then copied to the other zones,
// each change an operation followed to its end. Templates have no labels:
// whose a template is, is the provider's mark at the start of its
// description (templateDescription), read as on every Exoscale resource
// without labels (DescribedClusterID, resources.go); the maintainer
// (bootImageMaintainer), version and build say that the boot image
// controller made it and what it holds. A copy to another zone keeps all
// of them.

// bootImageMaintainer is the maintainer of the cluster's templates.
func bootImageMaintainer(clusterID string) string { return "machine-api-provider/" + clusterID }

// templateDescription marks a template the provider registers as the
// cluster's, then says what it holds for a person reading it.
func templateDescription(clusterID string, src cloud.BootImageSource) string {
	return fmt.Sprintf("%s cluster=%s boot image: RHCOS %s (%s, %s) of OpenShift %s", groupMarker, clusterID, src.RHCOS, src.Stream, src.Arch, src.Release)
}

// OperationPoll is how often an operation under way is looked at; tests
// make it shorter.
var OperationPoll = 3 * time.Second

// ourTemplate says whether t is one of the cluster's boot images: marked
// as the cluster's (the one reader of Exoscale's marks) and made by the
// import. A template of the name another cluster, a person or Terraform
// made is never listed, copied from or deleted.
func ourTemplate(t v3.Template, clusterID string) bool {
	return clusterID != "" && DescribedClusterID(t.Description) == clusterID &&
		t.Maintainer == bootImageMaintainer(clusterID) && t.Version != "" && strings.Count(t.Build, "/") == 2
}

func templateBootImage(t v3.Template, zone string) cloud.BootImage {
	parts := strings.SplitN(t.Build, "/", 3)
	for len(parts) < 3 {
		parts = append(parts, "")
	}
	return cloud.BootImage{
		ID: string(t.ID), Name: t.Name, Ref: t.Name, Zones: []string{zone}, Ready: true, CreatedAt: t.CreatedAT,
		RHCOS: t.Version, Stream: parts[0], Arch: parts[1], Release: parts[2],
	}
}

// zoneTemplates lists the private templates of a zone, uncached.
func (c *Client) zoneTemplates(ctx context.Context, zone string) (*v3.Client, []v3.Template, error) {
	zc, err := c.zoneClient(ctx, zone)
	if err != nil {
		return nil, nil, err
	}
	l, err := c.listTemplates(zc, v1beta1.TemplateVisibilityPrivate)(ctx)
	return zc, l, err
}

// ListBootImages lists the cluster's templates in every zone. A zone that
// does not answer is skipped with the others' templates and a
// *cloud.ZoneError.
func (c *Client) ListBootImages(ctx context.Context, clusterID string) ([]cloud.BootImage, error) {
	zones, err := c.allZones(ctx)
	if err != nil {
		return nil, err
	}
	var out []cloud.BootImage
	var errs []error
	for _, z := range zones {
		_, l, err := c.zoneTemplates(ctx, z)
		if err != nil {
			errs = append(errs, &cloud.ZoneError{Zone: z, Err: err})
			continue
		}
		for _, t := range l {
			if ourTemplate(t, clusterID) {
				out = append(out, templateBootImage(t, z))
			}
		}
	}
	return out, errors.Join(errs...)
}

// wait follows an operation of zone client zc until it ends.
func (c *Client) wait(ctx context.Context, zc *v3.Client, op *v3.Operation, what string) (*v3.Operation, error) {
	for op.State == v3.OperationStatePending {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(OperationPoll):
		}
		id := op.ID
		err := c.zcall(ctx, zc, "operation.get", func(ctx context.Context) (err error) {
			op, err = zc.GetOperation(ctx, id)
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("following the operation of %s: %w", what, err)
		}
	}
	return op, nil
}

// ImportBootImage registers src in the first of zones that lacks it (none
// has it) and copies it to the others.
func (c *Client) ImportBootImage(ctx context.Context, clusterID string, src cloud.BootImageSource, zones []string) ([]cloud.BootImage, error) {
	type zoneState struct {
		zc  *v3.Client
		tpl *v3.Template
	}
	have := map[string]*zoneState{}
	var out []cloud.BootImage
	var errs []error
	for _, z := range zones {
		zc, l, err := c.zoneTemplates(ctx, z)
		if err != nil {
			errs = append(errs, &cloud.BootImageError{Reason: cloud.ReasonZoneUnavailable, Zone: z, Err: err})
			continue
		}
		st := &zoneState{zc: zc}
		for i := range l {
			if l[i].Name == src.Name && ourTemplate(l[i], clusterID) {
				st.tpl = &l[i]
			}
		}
		have[z] = st
	}
	// the zone to copy from: one that has it, else where it is registered
	var from string
	for _, z := range zones {
		if st := have[z]; st != nil && st.tpl != nil {
			from = z
			break
		}
	}
	if from == "" {
		for _, z := range zones {
			if have[z] == nil {
				continue
			}
			tpl, err := c.registerTemplate(ctx, have[z].zc, clusterID, src)
			if err != nil {
				var be *cloud.BootImageError
				if errors.As(err, &be) {
					be.Zone = z
				}
				return nil, errors.Join(append(errs, err)...)
			}
			have[z].tpl, from = tpl, z
			break
		}
	}
	if from == "" {
		return nil, errors.Join(errs...)
	}
	source := have[from]
	for _, z := range zones {
		st := have[z]
		if st == nil {
			continue
		}
		if st.tpl == nil {
			tpl, err := c.copyTemplate(ctx, source.zc, st.zc, source.tpl, z)
			if err != nil {
				errs = append(errs, &cloud.BootImageError{Reason: cloud.ReasonZoneUnavailable, Zone: z, Err: err})
				continue
			}
			st.tpl = tpl
		}
		out = append(out, templateBootImage(*st.tpl, z))
	}
	return out, errors.Join(errs...)
}

func (c *Client) registerTemplate(ctx context.Context, zc *v3.Client, clusterID string, src cloud.BootImageSource) (*v3.Template, error) {
	req := v3.RegisterTemplateRequest{
		Name: src.Name, URL: src.URL, Checksum: src.MD5,
		BootMode: v3.RegisterTemplateRequestBootModeUefi, DefaultUser: "core",
		SSHKeyEnabled: v3.Bool(true), PasswordEnabled: v3.Bool(false),
		Description: templateDescription(clusterID, src),
		Version:     src.RHCOS, Build: src.Stream + "/" + src.Arch + "/" + src.Release, Maintainer: bootImageMaintainer(clusterID),
	}
	if req.Build == src.Stream+"/"+src.Arch+"/" {
		req.Build += "unknown"
	}
	var op *v3.Operation
	err := c.zcall(ctx, zc, "template.register", func(ctx context.Context) (err error) {
		op, err = zc.RegisterTemplate(ctx, req)
		return err
	})
	if err != nil {
		return nil, err
	}
	if op, err = c.wait(ctx, zc, op, "template.register"); err != nil {
		return nil, err
	}
	if op.State != v3.OperationStateSuccess {
		reason := cloud.ReasonImportFailed
		if strings.Contains(strings.ToLower(op.Message), "checksum") {
			reason = cloud.ReasonChecksumMismatch
		}
		return nil, &cloud.BootImageError{Reason: reason, Err: fmt.Errorf("the registration of template %s from %s ended %s (%s): %s", src.Name, src.URL, op.State, op.Reason, c.scrub(op.Message, cloud.Redactions(ctx)))}
	}
	return c.getTemplate(ctx, zc, op)
}

func (c *Client) getTemplate(ctx context.Context, zc *v3.Client, op *v3.Operation) (*v3.Template, error) {
	if op.Reference == nil {
		return nil, fmt.Errorf("the operation %s names no template", op.ID)
	}
	var tpl *v3.Template
	err := c.zcall(ctx, zc, "template.get", func(ctx context.Context) (err error) {
		tpl, err = zc.GetTemplate(ctx, op.Reference.ID)
		return err
	})
	return tpl, err
}

func (c *Client) copyTemplate(ctx context.Context, from, to *v3.Client, tpl *v3.Template, zone string) (*v3.Template, error) {
	var op *v3.Operation
	err := c.zcall(ctx, from, "template.copy", func(ctx context.Context) (err error) {
		op, err = from.CopyTemplate(ctx, tpl.ID, v3.CopyTemplateRequest{TargetZone: &v3.Zone{Name: v3.ZoneName(zone)}})
		return err
	})
	if err != nil {
		return nil, err
	}
	if op, err = c.wait(ctx, from, op, "template.copy"); err != nil {
		return nil, err
	}
	if op.State != v3.OperationStateSuccess {
		return nil, fmt.Errorf("the copy of template %s to %s ended %s (%s): %s", tpl.Name, zone, op.State, op.Reason, c.scrub(op.Message, cloud.Redactions(ctx)))
	}
	return c.getTemplate(ctx, to, op)
}

// DeleteBootImage deletes the template of img's zone after reading it
// again: only one that still carries the cluster's marks.
func (c *Client) DeleteBootImage(ctx context.Context, clusterID string, img cloud.BootImage) error {
	if len(img.Zones) != 1 {
		return fmt.Errorf("template %s: a template is in one zone, not %v", img.ID, img.Zones)
	}
	zc, err := c.zoneClient(ctx, img.Zones[0])
	if err != nil {
		return err
	}
	var tpl *v3.Template
	err = c.zcall(ctx, zc, "template.get", func(ctx context.Context) (err error) {
		tpl, err = zc.GetTemplate(ctx, v3.UUID(img.ID))
		return err
	})
	if cloud.IsNotFound(err) || errors.Is(err, v3.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if !ourTemplate(*tpl, clusterID) {
		return fmt.Errorf("template %s (%s) in %s: %w", tpl.Name, tpl.ID, img.Zones[0], cloud.ErrNotOurImage)
	}
	var op *v3.Operation
	err = c.zcall(ctx, zc, "template.delete", func(ctx context.Context) (err error) {
		op, err = zc.DeleteTemplate(ctx, tpl.ID)
		return err
	})
	if cloud.IsNotFound(err) || errors.Is(err, v3.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if op, err = c.wait(ctx, zc, op, "template.delete"); err != nil {
		return err
	}
	if op.State != v3.OperationStateSuccess {
		return fmt.Errorf("deleting template %s in %s ended %s (%s): %s", tpl.Name, img.Zones[0], op.State, op.Reason, c.scrub(op.Message, cloud.Redactions(ctx)))
	}
	return nil
}

var (
	_ cloud.ImageClient = (*Client)(nil)
	_ cloud.ImageCloud  = (*Cloud)(nil)
)

// SpecImageRef reads the template name (a private template by name) and
// zone of an Exoscale spec.
func (c *Cloud) SpecImageRef(ps machinev1.ProviderSpec) (string, string, error) {
	if ps.Value == nil {
		return "", "", errors.New("the provider spec is empty")
	}
	var p struct {
		Zone     string              `json:"zone"`
		Template v1beta1.TemplateRef `json:"template"`
	}
	if err := json.Unmarshal(ps.Value.Raw, &p); err != nil {
		return "", "", err
	}
	if p.Template.ID != "" || !slices.Contains([]v1beta1.TemplateVisibility{"", v1beta1.TemplateVisibilityPrivate}, p.Template.Visibility) {
		return "", p.Zone, nil
	}
	return p.Template.Name, p.Zone, nil
}

// WithSpecImageRef names the private template ref in ps.
func (c *Cloud) WithSpecImageRef(ps machinev1.ProviderSpec, ref string) (machinev1.ProviderSpec, error) {
	return cloud.WithSpecField(ps, "template", v1beta1.TemplateRef{Name: ref, Visibility: v1beta1.TemplateVisibilityPrivate})
}

// BootImageMirrorFile: Exoscale registers the OpenStack qcow2 prepared for
// Exoscale (ignition.platform.id=exoscale, `machine-api-provider images
// prepare`), which the mirror holds under this name, its MD5 beside it
// (<file>.md5).
func (c *Cloud) BootImageMirrorFile(openstackFile string) string {
	return strings.Replace(openstackFile, "-openstack.", "-exoscale.", 1)
}
