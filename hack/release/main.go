// Command release writes what a release of the provider is made of, from
// config/ as kustomize renders it, so that nothing of an install is written
// twice (docs/releasing.md):
//
//	pin      pins the provider's image by digest in config/image
//	notes    the release notes: the version's section of CHANGELOG.md, and how to install it
//	bundle   the OLM registry+v1 bundle of one cloud, from its overlay's rendering and config/olm/<cloud>
//	catalog  the file-based catalog (olm.package, olm.channel, olm.bundle) of a bundle and its image
//
// The Makefile runs it (make release, make bundle); each subcommand's -h
// lists its flags.
package main

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch cmd, args := os.Args[1], os.Args[2:]; cmd {
	case "pin":
		err = pinCommand(args)
	case "notes":
		err = notesCommand(args)
	case "bundle":
		err = bundleCommand(args)
	case "catalog":
		err = catalogCommand(args)
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: release pin|notes|bundle|catalog [flags] (release <subcommand> -h)")
	os.Exit(2)
}

func pinCommand(args []string) error {
	f := flag.NewFlagSet("pin", flag.ExitOnError)
	file := f.String("file", "config/image/kustomization.yaml", "the image component to pin")
	image := f.String("image", "", "the image by digest: <registry>/<repository>@sha256:<digest>")
	runbooks := f.String("runbooks-ref", "", "also point the alerts' runbook_url at this ref (the release's tag) instead of main")
	rules := f.String("rules", "config/prometheus/prometheusrule.yaml", "the PrometheusRule whose runbook_url --runbooks-ref pins")
	_ = f.Parse(args)
	if err := Pin(*file, *image); err != nil {
		return err
	}
	fmt.Printf("%s: the image is %s\n", *file, *image)
	if *runbooks != "" {
		if err := PinRunbooks(*file, *rules, *runbooks); err != nil {
			return err
		}
		fmt.Printf("%s: the alerts' runbooks are those of %s\n", *file, *runbooks)
	}
	return nil
}

func notesCommand(args []string) error {
	f := flag.NewFlagSet("notes", flag.ExitOnError)
	changelog := f.String("changelog", "CHANGELOG.md", "the changelog (Keep a Changelog)")
	o := NotesOptions{}
	f.StringVar(&o.Version, "version", "", "the release, vX.Y.Z")
	f.StringVar(&o.Image, "image", "", "the provider's image by digest")
	f.StringVar(&o.Repository, "repository", "https://github.com/appuio/machine-api-provider", "the repository, for the install commands")
	f.StringVar(&o.SignerIdentity, "signer-identity", "", "the identity whose Sigstore certificate signs the release (make release-sign); empty: the notes say it is not signed")
	f.StringVar(&o.SignerIssuer, "signer-issuer", "https://github.com/login/oauth", "the OIDC issuer of --signer-identity")
	out := f.String("out", "", "write the notes here (default stdout)")
	_ = f.Parse(args)
	data, err := os.ReadFile(*changelog)
	if err != nil {
		return err
	}
	notes, err := Notes(string(data), o)
	if err != nil {
		return fmt.Errorf("%s: %w", *changelog, err)
	}
	if *out == "" {
		_, err = os.Stdout.WriteString(notes)
		return err
	}
	return os.WriteFile(*out, []byte(notes), 0o644)
}

func bundleCommand(args []string) error {
	f := flag.NewFlagSet("bundle", flag.ExitOnError)
	var o BundleOptions
	objects := f.String("objects", "", "the overlay's rendering (install-<cloud>.yaml)")
	csv := f.String("csv", "", "config/olm/<cloud> rendered: the ClusterServiceVersion's description")
	f.StringVar(&o.Icon, "icon", "config/olm/base/icon.svg", "the icon (SVG)")
	f.StringVar(&o.Package, "package", "", "the OLM package, machine-api-provider-<cloud>")
	f.StringVar(&o.Channel, "channel", "stable", "the channel")
	f.StringVar(&o.Version, "version", "", "the release, vX.Y.Z")
	f.StringVar(&o.OpenShiftVersions, "openshift-versions", "v4.16", "the OpenShift releases the bundle is for (com.redhat.openshift.versions: v4.16 is 4.16 and later)")
	epoch := f.String("source-date-epoch", os.Getenv("SOURCE_DATE_EPOCH"), "Unix time of the CSV's createdAt")
	out := f.String("out", "", "the bundle directory to write (manifests/, metadata/)")
	_ = f.Parse(args)
	secs, err := strconv.ParseInt(*epoch, 10, 64)
	if err != nil {
		return fmt.Errorf("--source-date-epoch %q: %v", *epoch, err)
	}
	o.Created = time.Unix(secs, 0).UTC()
	if o.Objects, err = readObjects(*objects); err != nil {
		return err
	}
	csvObjs, err := readObjects(*csv)
	if err != nil {
		return err
	}
	if len(csvObjs) != 1 {
		return fmt.Errorf("%s: %d objects, want the one ClusterServiceVersion", *csv, len(csvObjs))
	}
	o.CSV = csvObjs[0]
	b, err := BuildBundle(o)
	if err != nil {
		return err
	}
	if err := b.Write(*out); err != nil {
		return err
	}
	fmt.Printf("%s: bundle %s (%d manifests)\n", *out, b.CSVName, len(b.Manifests))
	for _, l := range b.Left {
		fmt.Printf("  left out of the bundle: %s\n", l)
	}
	return nil
}

func catalogCommand(args []string) error {
	f := flag.NewFlagSet("catalog", flag.ExitOnError)
	bundleDir := f.String("bundle", "", "the bundle directory (make bundle)")
	image := f.String("bundle-image", "", "the bundle's image by digest")
	out := f.String("out", "", "the catalog file to write (<catalog>/<package>/catalog.yaml)")
	_ = f.Parse(args)
	data, err := Catalog(*bundleDir, *image)
	if err != nil {
		return err
	}
	if err := writeFile(*out, data); err != nil {
		return err
	}
	fmt.Printf("%s: catalog of %s\n", *out, *image)
	return nil
}
