package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/appuio/machine-api-provider/pkg/bootimages"
	"github.com/appuio/machine-api-provider/pkg/cloud"
	exocloud "github.com/appuio/machine-api-provider/pkg/cloud/exoscale"
	"github.com/appuio/machine-api-provider/pkg/manager"
)

// imagesFlags are the flags every images subcommand takes.
type imagesFlags struct {
	cloudName, kubeconfig, namespace, clusterID, mirror string
	apiURL, exoAPI                                      string
	followAll                                           bool
	timeout                                             time.Duration
}

func (f *imagesFlags) bind(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.cloudName, "cloud", "cloudscale", "the cloud: cloudscale or exoscale")
	fl.StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig file (default: in-cluster config, $KUBECONFIG or ~/.kube/config)")
	fl.StringVar(&f.namespace, "namespace", "openshift-machine-api", "namespace of the Machine API")
	fl.StringVar(&f.clusterID, "cluster-id", "", "the cluster's identity (default: the Infrastructure's infrastructureName): only its MachineSets are considered, its images carry it")
	fl.StringVar(&f.mirror, "mirror", "", "base URL of the mirror holding the release's images as the cloud imports them (required; `images prepare` makes the files)")
	fl.BoolVar(&f.followAll, "follow-all", false, "move every MachineSet without an owner reference, not only those labelled "+bootimages.FollowLabel+"=true")
	fl.DurationVar(&f.timeout, "cloud-api-timeout", 30*time.Second, "how long one cloud API call may take")
	fl.StringVar(&f.apiURL, "cloudscale-api-url", os.Getenv("CLOUDSCALE_API_URL"), "cloudscale.ch API base URL (default $CLOUDSCALE_API_URL, else the real API)")
	fl.StringVar(&f.exoAPI, "exoscale-api-endpoint", os.Getenv(exocloud.EnvAPIEndpoint), "Exoscale API endpoint (default $EXOSCALE_API_ENDPOINT, else "+exocloud.DefaultEndpoint+")")
}

// tool builds the images tool from the flags.
func (f *imagesFlags) tool(cmd *cobra.Command) (*bootimages.Tool, error) {
	if f.mirror == "" {
		return nil, errors.New("--mirror is required: the base URL the cloud downloads the images from (docs/boot-images.md)")
	}
	if f.timeout <= 0 {
		return nil, fmt.Errorf("--cloud-api-timeout (%s) must be positive", f.timeout)
	}
	c, err := newCloud(f.cloudName, cloudEndpoints{cloudscale: f.apiURL, exoscale: f.exoAPI}, f.timeout, types.NamespacedName{})
	if err != nil {
		return nil, err
	}
	kube, err := imagesClient(f.kubeconfig)
	if err != nil {
		return nil, err
	}
	ctx := cmd.Context()
	id := f.clusterID
	if id == "" {
		infra := &configv1.Infrastructure{}
		if err := kube.Get(ctx, types.NamespacedName{Name: "cluster"}, infra); err != nil {
			return nil, fmt.Errorf("reading the cluster's identity (or give --cluster-id): %w", err)
		}
		id = infra.Status.InfrastructureName
	}
	if err := checkClusterID(id); err != nil {
		return nil, err
	}
	clients := map[string]cloud.ImageClient{}
	return &bootimages.Tool{
		Options: bootimages.Options{ClusterID: id, Cloud: c, Mirror: f.mirror, FollowAll: f.followAll},
		Client:  kube, Namespace: f.namespace, Out: cmd.OutOrStdout(),
		Clients: func(ctx context.Context, secret string) (cloud.ImageClient, error) {
			if ic := clients[secret]; ic != nil {
				return ic, nil
			}
			creds, err := cloud.ReadCredentials(ctx, kube, c, f.namespace, secret, "spec.template.spec.providerSpec.value.credentialsSecret")
			if err != nil {
				return nil, err
			}
			cl, err := c.NewClient(creds, cloud.NewGate(c.Name(), c.DefaultRateLimit()))
			if err != nil {
				return nil, err
			}
			ic, ok := cl.(cloud.ImageClient)
			if !ok {
				return nil, fmt.Errorf("the %s client has no boot images", c.Name())
			}
			clients[secret] = ic
			return ic, nil
		},
	}, nil
}

// imagesClient reads and writes what the images commands need: the Machine
// API, the ConfigMap and secrets, the Infrastructure and ClusterVersion,
// the MachineConfiguration.
func imagesClient(kubeconfig string) (client.Client, error) {
	cfg, err := restConfig(kubeconfig)
	if err != nil {
		return nil, err
	}
	scheme, err := manager.Scheme()
	if err != nil {
		return nil, err
	}
	if err := configv1.Install(scheme); err != nil {
		return nil, err
	}
	return client.New(cfg, client.Options{Scheme: scheme})
}

func imagesCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "images",
		Short: "Import the release's RHCOS boot images into the cloud and point MachineSets at them",
		Long: `The boot image controller's work (docs/boot-images.md), one step at a time, for teams that
import by hand or from CI: the release's RHCOS images (ConfigMap
openshift-machine-config-operator/coreos-bootimages), per OS stream and architecture, imported
from the operator's mirror into every zone the MachineSets use; the MachineSets that follow the
release (label ` + bootimages.FollowLabel + `=true, or --follow-all) moved to them; the provider's
images no MachineSet or Machine names deleted. Every command prints its plan first and changes
nothing without --apply. Images the provider did not import are never changed or deleted, nor
are MachineSets with an owner reference; Machines are not replaced.

Credentials: as the manager's, from CLOUDSCALE_API_TOKEN or EXOSCALE_API_KEY and
EXOSCALE_API_SECRET, or the secrets the MachineSets name.`,
	}
	cmd.AddCommand(imagesPlanCommand(), imagesImportCommand(), imagesPruneCommand(), imagesPrepareCommand())
	return cmd
}

func imagesPlanCommand() *cobra.Command {
	var f imagesFlags
	cmd := &cobra.Command{
		Use:     "plan",
		Short:   "Print what import and prune would do, and the oldest boot image for the skew record",
		Example: `  CLOUDSCALE_API_TOKEN=... machine-api-provider images plan --mirror https://objects.rma.cloudscale.ch/rhcos`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			t, err := f.tool(cmd)
			if err != nil {
				return err
			}
			p, err := t.Plan(cmd.Context())
			if err != nil {
				return err
			}
			p.Print(t.Out, t.Options)
			return nil
		},
	}
	f.bind(cmd)
	return cmd
}

func imagesImportCommand() *cobra.Command {
	var (
		f     imagesFlags
		apply bool
	)
	cmd := &cobra.Command{
		Use:   "import",
		Short: "Import the release's images where the MachineSets need them, and move those that follow",
		Example: `  # the plan
  CLOUDSCALE_API_TOKEN=... machine-api-provider images import --mirror https://objects.rma.cloudscale.ch/rhcos
  # carry it out
  CLOUDSCALE_API_TOKEN=... machine-api-provider images import --mirror https://objects.rma.cloudscale.ch/rhcos --apply`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			t, err := f.tool(cmd)
			if err != nil {
				return err
			}
			return t.Import(cmd.Context(), apply)
		},
	}
	f.bind(cmd)
	cmd.Flags().BoolVar(&apply, "apply", false, "carry the plan out (default: only print it)")
	return cmd
}

func imagesPruneCommand() *cobra.Command {
	var (
		f     imagesFlags
		apply bool
		age   time.Duration
	)
	cmd := &cobra.Command{
		Use:   "prune",
		Short: "Delete the provider's images that no MachineSet or Machine names",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			t, err := f.tool(cmd)
			if err != nil {
				return err
			}
			t.MinAge = age
			return t.Prune(cmd.Context(), apply)
		},
	}
	f.bind(cmd)
	cmd.Flags().BoolVar(&apply, "apply", false, "delete them (default: only print the plan)")
	cmd.Flags().DurationVar(&age, "min-age", 24*time.Hour, "prune only images imported longer ago than this")
	return cmd
}

func imagesPrepareCommand() *cobra.Command {
	var (
		kubeconfig, osStream, arch, from, dir string
		exoscale                              bool
	)
	cmd := &cobra.Command{
		Use:   "prepare",
		Short: "Make the mirror's files of the release's image: the OpenStack qcow2, and its Exoscale copy",
		Long: `Download the release's OpenStack qcow2.gz (or read it from --from), check it against the stream,
decompress it (cloudscale.ch imports it as it is) and, with --exoscale, make the copy Exoscale
boots: ignition.platform.id=exoscale in its boot loader entries, set by libguestfs's virt-edit
(Debian: apt-get install libguestfs-tools), and its MD5 beside it. Upload the files of the
output directory to the mirror; docs/boot-images.md has the same steps command for command.`,
		Example: `  machine-api-provider images prepare --exoscale --dir ./mirror`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			kube, err := imagesClient(kubeconfig)
			if err != nil {
				return err
			}
			rel, err := bootimages.LoadRelease(cmd.Context(), kube)
			if err != nil {
				return err
			}
			img, err := rel.Image(osStream, arch)
			if err != nil {
				return err
			}
			p := &bootimages.Prepare{Image: img, From: from, Dir: dir, Exoscale: exoscale, Out: cmd.OutOrStdout()}
			return p.Do(cmd.Context())
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig file (default: in-cluster config, $KUBECONFIG or ~/.kube/config)")
	fl.StringVar(&osStream, "os-stream", bootimages.DefaultStream, "the OS stream (rhel-9, rhel-10)")
	fl.StringVar(&arch, "arch", bootimages.DefaultArch, "the architecture, as in kubernetes.io/arch")
	fl.StringVar(&from, "from", "", "the stream's openstack qcow2.gz, downloaded already (default: download it)")
	fl.StringVar(&dir, "dir", ".", "where to write the files")
	fl.BoolVar(&exoscale, "exoscale", false, "also make the Exoscale copy (needs virt-ls, virt-edit and virt-cat)")
	return cmd
}

// warnBootImageSkew says, before adopt's and the switch's plans, when the
// cluster would be held back by the boot-image skew enforcement of
// OpenShift 4.22, and how to clear it.
func warnBootImageSkew(ctx context.Context, out io.Writer, kube client.Reader) {
	msg, err := bootimages.HeldBack(ctx, kube, "")
	if err != nil {
		fmt.Fprintf(out, "WARNING: could not tell whether boot-image skew enforcement would hold the cluster back: %v\n\n", err)
		return
	}
	if msg != "" {
		fmt.Fprintf(out, "WARNING: %s\n\n", msg)
	}
}
