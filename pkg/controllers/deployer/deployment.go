package deployer

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"
)

// Images are the entries of the machine-api-operator's images.json that the
// controllers Deployment runs. The file has an entry per supported cloud
// too; those are not read.
type Images struct {
	// MachineAPIOperator runs the machineset, nodelink and
	// machine-healthcheck controllers.
	MachineAPIOperator string `json:"machineAPIOperator"`
	// KubeRBACProxy guards the metrics endpoints.
	KubeRBACProxy string `json:"kubeRBACProxy"`
}

// ParseImages reads images.json. Both images must be named.
func ParseImages(data string) (Images, error) {
	var im Images
	if err := json.Unmarshal([]byte(data), &im); err != nil {
		return Images{}, fmt.Errorf("%s is not valid JSON: %w", ImagesKey, err)
	}
	var missing []string
	if strings.TrimSpace(im.MachineAPIOperator) == "" {
		missing = append(missing, "machineAPIOperator")
	}
	if strings.TrimSpace(im.KubeRBACProxy) == "" {
		missing = append(missing, "kubeRBACProxy")
	}
	if len(missing) > 0 {
		return Images{}, errors.New(ImagesKey + " names no image for " + strings.Join(missing, " and "))
	}
	return im, nil
}

// HashImages is the digest of images.json put on the pod template, so that
// any change of the release's images rolls the pods.
func HashImages(data string) string {
	sum := sha256.Sum256([]byte(data))
	return hex.EncodeToString(sum[:])
}

// Spec is everything the controllers Deployment is built from.
type Spec struct {
	// Namespace of the Deployment and of the Machines it manages.
	Namespace string
	// Images from the machine-api-operator's images.json.
	Images Images
	// ImagesHash is HashImages of images.json; it goes on the pod template.
	ImagesHash string
	// ProviderImage runs this provider's manager as the machine-controller.
	ProviderImage string
	// TokenSecret names the secret holding the provider's default
	// credentials (cloudscale.ch: key "token"; Exoscale: "api-key" and
	// "api-secret"), which the manager reads at every use
	// (--default-credentials-secret), so that replacing it needs no
	// restart. Machines may name their own secret instead.
	TokenSecret string
	// ServiceAccount the pods run as.
	ServiceAccount string
	// Own are the deployer's own options it hands the manager, by the
	// name of their flag in OwnFlags (an API endpoint pointing the
	// provider at the emulator in a demo, the boot image mirror): the one
	// way to set them on a cluster (ReservedManagerFlags).
	Own map[string]string
	// WithoutMachineHealthCheck leaves out the machine-healthcheck
	// controller and its metrics proxy.
	WithoutMachineHealthCheck bool
	// Cloud is handed to the provider's manager as --cloud; "" keeps the
	// manager's default (DefaultCloud). It names the Deployment
	// (DeploymentName).
	Cloud string
	// ProviderEnv is further environment of the provider (an API endpoint).
	ProviderEnv []corev1.EnvVar
	// Proxy is the cluster-wide proxy, handed to the provider (proxy.go).
	Proxy Proxy
	// TrustedCAHash is HashTrustedCA of the trusted CA bundle; it goes on
	// the pod template when set.
	TrustedCAHash string
	// Release is the OpenShift release whose machine-api-operator
	// controllers the Deployment runs (releases.go): their flags. The zero
	// value is the newest known release.
	Release Release
	// ManagerConfig are further flags of the provider's manager, from
	// ManagerConfigMap, checked (managerconfig.go).
	ManagerConfig ManagerConfig
	// ClusterID is the cluster's identity, the manager's --cluster-id
	// (clusterid.go).
	ClusterID string
	// LegacyClusterIDs are the legacy cluster IDs it also owns, the
	// manager's --legacy-cluster-ids (clusterid.go).
	LegacyClusterIDs []string
	// Stopped runs the controllers with 0 replicas (stop.go); StopSwitch
	// says that StopConfigMap stops them (the Deployment is annotated
	// StoppedAnnotation), not a scale to 0.
	Stopped, StopSwitch bool
	// TLSArgs are --tls-cipher-suites and --tls-min-version rendered from
	// the cluster's APIServer (tlsprofile.go), for a release whose
	// machineset-controller and kube-rbac-proxy sidecars take them
	// (Release.TLSFlags); nil renders the default profile's
	// (Intermediate).
	TLSArgs []string
}

// DefaultCloud is the cloud of a Spec or Options without one: the
// manager's default.
const DefaultCloud = "cloudscale"

// DeploymentName is the name of our Deployment for cloud ("" is
// DefaultCloud), machine-api-controllers-<cloud>, and the value of the
// instance label its pods carry. It never clashes with the operator's OperatorDeploymentName,
// and an operator sees which cloud the controllers run for. The RBAC in
// config/ names it too.
func DeploymentName(cloud string) string {
	if cloud == "" {
		cloud = DefaultCloud
	}
	return OperatorDeploymentName + "-" + cloud
}

// checkCloud refuses a cloud that cannot be part of DeploymentName: it
// must be a valid label value and make a valid object name.
func checkCloud(cloud string) error {
	name := DeploymentName(cloud)
	problems := validation.IsDNS1123Label(name)
	problems = append(problems, validation.IsValidLabelValue(name)...)
	if len(problems) > 0 {
		return fmt.Errorf("cloud %q makes the Deployment name %q, which is not valid: %s", cloud, name, strings.Join(problems, "; "))
	}
	return nil
}

// Labels and annotations of the Deployment.
const (
	// ManagedByLabel marks what the deployer applies.
	ManagedByLabel = "app.kubernetes.io/managed-by"
	// ManagedByValue is ManagedByLabel's value, and the field manager of
	// the deployer's server-side applies.
	ManagedByValue = "machine-api-provider-deployer"
	// ImagesHashAnnotation on the pod template is HashImages of the
	// images.json the pods were built from.
	ImagesHashAnnotation = "machine.appuio.io/images-hash"
	// ReleaseAnnotation on the Deployment names the OpenShift release
	// (x.y) whose controllers' flags it was rendered with.
	ReleaseAnnotation = "machine.appuio.io/openshift-release"
	// instanceLabel tells our pods apart from the operator's in the
	// Deployment's selector (its selector is immutable).
	instanceLabel = "app.kubernetes.io/instance"
)

// Container names. The machine-api-operator's Deployment uses the same
// ones, so runbooks and `oc logs -c` work the same on both.
const (
	MachineSetContainer         = "machineset-controller"
	MachineContainer            = "machine-controller"
	NodeLinkContainer           = "nodelink-controller"
	MachineHealthCheckContainer = "machine-healthcheck-controller"
	ProxyContainerPrefix        = "kube-rbac-proxy-"
)

// Ports. The Services the machine-api-operator's manifests install on every
// platform (machine-api-controllers for metrics, machine-api-operator-webhook
// for the MachineSet and Machine webhooks) select the pods by the labels
// api=clusterapi and k8s-app=controller and target these port names.
const (
	machineSetWebhookPort = 8443
	machineHealthPort     = 9440
	machineSetHealthPort  = 9441
	mhcHealthPort         = 9442

	// The controllers serve metrics on the loopback only; the
	// kube-rbac-proxy sidecars publish them with TLS and authorization.
	machineMetricsAddr    = "127.0.0.1:8081"
	machineSetMetricsAddr = "127.0.0.1:8082"
	mhcMetricsAddr        = "127.0.0.1:8083"

	machineMetricsPort    = 8441
	machineSetMetricsPort = 8442
	mhcMetricsPort        = 8444
)

// Health port names. The operator names all three "healthz"; distinct
// names spare the API server's warning about duplicate port names in a pod.
const (
	machineSetHealthPortName = "ms-healthz"
	machineHealthPortName    = "machine-healthz"
	mhcHealthPortName        = "mhc-healthz"
)

// Volumes the pods mount. The secrets are the service CA's serving
// certificates for the Services above; the ConfigMaps come with the
// machine-api-operator's manifests.
const (
	proxyConfigVolume       = "config"
	proxyConfigMap          = "kube-rbac-proxy"
	proxyTLSVolume          = "machine-api-controllers-tls"
	machineSetWebhookVolume = "machineset-webhook-cert"
	machineSetWebhookSecret = "machine-api-operator-webhook-cert"
	trustedCAVolume         = "trusted-ca"

	webhookCertDir = "/etc/machine-api-operator/tls"
	proxyConfigDir = "/etc/kube-rbac-proxy"
	proxyTLSDir    = "/etc/tls/private"
	trustedCADir   = "/etc/pki/ca-trust/extracted/pem"
)

// The TLS 1.2 suites OpenShift's intermediate profile allows: what the
// operator passes the kube-rbac-proxy sidecars up to 4.21
// (pkg/operator/sync.go newKubeProxyContainer on release-4.21), a fixed
// list; from 4.22 they get the cluster's profile (Spec.TLSArgs).
var proxyCipherSuites = strings.Join([]string{
	"TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
	"TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
	"TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
	"TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
	"TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305",
	"TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305",
}, ",")

// podLabels are the labels the machine-api-operator's Services select.
func podLabels() map[string]string {
	return map[string]string{"api": "clusterapi", "k8s-app": "controller"}
}

// Deployment builds the controllers Deployment: the machine-api-operator's
// machineset, nodelink and machine-healthcheck controllers, this provider's
// manager as the machine controller, and a kube-rbac-proxy in front of each
// metrics endpoint, placed and prioritised as the operator places its own.
func Deployment(s Spec) *appsv1.Deployment {
	if s.Release.Major == 0 {
		s.Release = Newest()
	}
	if s.Release.TLSFlags && s.TLSArgs == nil {
		// the default profile's, as for a cluster without an APIServer
		s.TLSArgs, _ = TLSProfile{}.Args() // Intermediate always renders
	}
	name := DeploymentName(s.Cloud)
	selector := podLabels()
	selector[instanceLabel] = name
	tmplLabels := podLabels()
	tmplLabels[instanceLabel] = name
	tmplLabels[ManagedByLabel] = ManagedByValue
	labels := podLabels()
	labels[ManagedByLabel] = ManagedByValue

	containers := []corev1.Container{
		machineSetContainer(s),
		machineContainer(s),
		nodeLinkContainer(s),
	}
	if !s.WithoutMachineHealthCheck {
		containers = append(containers, mhcContainer(s))
	}
	annotations := map[string]string{
		// workload partitioning: the pods count as management
		// workload, like the operator's
		"target.workload.openshift.io/management": `{"effect": "PreferredDuringScheduling"}`,
		"openshift.io/required-scc":               "restricted-v2",
		"kubectl.kubernetes.io/default-container": MachineContainer,
		ImagesHashAnnotation:                      s.ImagesHash,
	}
	if s.TrustedCAHash != "" {
		annotations[TrustedCAHashAnnotation] = s.TrustedCAHash
	}
	containers = append(containers,
		proxyContainer(s, "machineset-mtrc", machineSetMetricsPort, machineSetMetricsAddr),
		proxyContainer(s, "machine-mtrc", machineMetricsPort, machineMetricsAddr),
	)
	if !s.WithoutMachineHealthCheck {
		containers = append(containers, proxyContainer(s, "mhc-mtrc", mhcMetricsPort, mhcMetricsAddr))
	}

	deploymentAnnotations := map[string]string{ReleaseAnnotation: s.Release.String()}
	if len(s.ManagerConfig) > 0 {
		raw, _ := json.Marshal(s.ManagerConfig) // a map of strings always marshals
		deploymentAnnotations[ManagerConfigAnnotation] = string(raw)
	}
	replicas := int32(1)
	if s.Stopped {
		replicas = 0
	}
	if s.StopSwitch {
		deploymentAnnotations[StoppedAnnotation] = StopConfigMap
	}
	return &appsv1.Deployment{
		TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Namespace:   s.Namespace,
			Labels:      labels,
			Annotations: deploymentAnnotations,
		},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: selector},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{
					Labels:      tmplLabels,
					Annotations: annotations,
				},
				Spec: corev1.PodSpec{
					Containers:         containers,
					ServiceAccountName: s.ServiceAccount,
					PriorityClassName:  "system-node-critical",
					NodeSelector:       map[string]string{"node-role.kubernetes.io/master": ""},
					Tolerations: []corev1.Toleration{
						{Key: "node-role.kubernetes.io/master", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
						{Key: "CriticalAddonsOnly", Operator: corev1.TolerationOpExists},
						{Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](120)},
						{Key: "node.kubernetes.io/unreachable", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](120)},
					},
					Volumes: volumes(),
				},
			},
		},
	}
}

// requests are the operator's requests for every container.
func requests() corev1.ResourceRequirements {
	return corev1.ResourceRequirements{Requests: corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("10m"),
		corev1.ResourceMemory: resource.MustParse("20Mi"),
	}}
}

// maoArgs are the flags the machine-api-operator's controllers share:
// klog to stderr, leader election with the operator's lease duration, and
// the namespace to watch.
func maoArgs(ns string) []string {
	return []string{
		"--logtostderr=true",
		"--v=3",
		"--leader-elect=true",
		"--leader-elect-lease-duration=120s",
		"--namespace=" + ns,
	}
}

func httpProbe(path, port string) corev1.ProbeHandler {
	return corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: path, Port: intstr.FromString(port)}}
}

func machineSetContainer(s Spec) corev1.Container {
	// the release's own flags (releases.go), then the metrics address,
	// which every known release takes
	args := append(maoArgs(s.Namespace), s.Release.machineSetArgs(s.TLSArgs)...)
	args = append(args, "--metrics-bind-address="+machineSetMetricsAddr)
	return corev1.Container{
		Name:    MachineSetContainer,
		Image:   s.Images.MachineAPIOperator,
		Command: []string{"/machineset-controller"},
		Args:    args,
		Ports: []corev1.ContainerPort{
			{Name: "webhook-server", ContainerPort: machineSetWebhookPort},
			{Name: machineSetHealthPortName, ContainerPort: machineSetHealthPort},
		},
		// Up to five minutes to come up (the webhook certificate may be
		// issued after the pod starts), then the usual checks.
		StartupProbe: &corev1.Probe{
			ProbeHandler:     httpProbe("/readyz", machineSetHealthPortName),
			PeriodSeconds:    10,
			TimeoutSeconds:   10,
			FailureThreshold: 30,
			SuccessThreshold: 1,
		},
		ReadinessProbe: &corev1.Probe{
			ProbeHandler:     httpProbe("/readyz", machineSetHealthPortName),
			PeriodSeconds:    10,
			TimeoutSeconds:   5,
			FailureThreshold: 3,
			SuccessThreshold: 1,
		},
		LivenessProbe: &corev1.Probe{
			ProbeHandler:     httpProbe("/healthz", machineSetHealthPortName),
			PeriodSeconds:    10,
			TimeoutSeconds:   5,
			FailureThreshold: 3,
			SuccessThreshold: 1,
		},
		Resources:                requests(),
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
		VolumeMounts: []corev1.VolumeMount{
			{Name: machineSetWebhookVolume, MountPath: webhookCertDir, ReadOnly: true},
		},
	}
}

// machineContainer is this provider's manager in the place of the
// operator's per-cloud machine-controller-manager.
func machineContainer(s Spec) corev1.Container {
	// The default credentials are no environment variables: those would
	// keep the values the pod started with, and a rotated secret would
	// need a restart. The manager reads the secret at every use instead.
	env := []corev1.EnvVar{
		{
			Name:      "NODE_NAME",
			ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.nodeName"}},
		},
		{
			// Go reads the image's own bundle (/etc/ssl/certs) and stops
			// looking for files; the cluster's trust bundle mounted below
			// counts only as a directory it is told about.
			Name:  "SSL_CERT_DIR",
			Value: trustedCADir + ":/etc/ssl/certs",
		},
	}
	// the cluster-wide proxy, for the calls to the cloud's API
	env = append(env, s.Proxy.env(s.ProviderEnv)...)
	env = append(env, s.ProviderEnv...)
	// the flags the deployer sets (reservedflags.go, the deployer's own
	// options among them), then the cluster's own settings, which
	// ReservedManagerFlags keeps off the former
	args := append(reservedArgs(s), s.ManagerConfig.Args()...)
	return corev1.Container{
		Name:    MachineContainer,
		Image:   s.ProviderImage,
		Command: []string{"/machine-api-provider", "manager"},
		Args:    args,
		Env:     env,
		Ports: []corev1.ContainerPort{
			{Name: machineHealthPortName, ContainerPort: machineHealthPort},
		},
		ReadinessProbe:           &corev1.Probe{ProbeHandler: httpProbe("/readyz", machineHealthPortName)},
		LivenessProbe:            &corev1.Probe{ProbeHandler: httpProbe("/healthz", machineHealthPortName)},
		Resources:                requests(),
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
		VolumeMounts: []corev1.VolumeMount{
			// the cluster's trust bundle (proxy CAs included) for the
			// calls to the cloud's API
			{Name: trustedCAVolume, MountPath: trustedCADir, ReadOnly: true},
		},
	}
}

func nodeLinkContainer(s Spec) corev1.Container {
	return corev1.Container{
		Name:                     NodeLinkContainer,
		Image:                    s.Images.MachineAPIOperator,
		Command:                  []string{"/nodelink-controller"},
		Args:                     maoArgs(s.Namespace),
		Resources:                requests(),
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
	}
}

func mhcContainer(s Spec) corev1.Container {
	return corev1.Container{
		Name:    MachineHealthCheckContainer,
		Image:   s.Images.MachineAPIOperator,
		Command: []string{"/machine-healthcheck"},
		Args:    append(maoArgs(s.Namespace), "--metrics-bind-address="+mhcMetricsAddr),
		Ports: []corev1.ContainerPort{
			{Name: mhcHealthPortName, ContainerPort: mhcHealthPort},
		},
		ReadinessProbe:           &corev1.Probe{ProbeHandler: httpProbe("/readyz", mhcHealthPortName)},
		LivenessProbe:            &corev1.Probe{ProbeHandler: httpProbe("/healthz", mhcHealthPortName)},
		Resources:                requests(),
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
	}
}

// proxyContainer publishes the metrics at upstream (a loopback address) on
// port, behind TLS and a SubjectAccessReview, as port name portName, with
// the release's TLS flags.
func proxyContainer(s Spec, portName string, port int32, upstream string) corev1.Container {
	args := []string{
		fmt.Sprintf("--secure-listen-address=0.0.0.0:%d", port),
		"--upstream=http://" + upstream + "/",
		"--config-file=" + proxyConfigDir + "/config-file.yaml",
		"--tls-cert-file=" + proxyTLSDir + "/tls.crt",
		"--tls-private-key-file=" + proxyTLSDir + "/tls.key",
	}
	if s.Release.TLSFlags {
		args = append(args, s.TLSArgs...)
	} else {
		args = append(args, "--tls-cipher-suites="+proxyCipherSuites)
	}
	args = append(args, "--logtostderr=true", "--v=3")
	return corev1.Container{
		Name:                     ProxyContainerPrefix + portName,
		Image:                    s.Images.KubeRBACProxy,
		Args:                     args,
		Ports:                    []corev1.ContainerPort{{Name: portName, ContainerPort: port}},
		Resources:                requests(),
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
		VolumeMounts: []corev1.VolumeMount{
			{Name: proxyConfigVolume, MountPath: proxyConfigDir, ReadOnly: true},
			{Name: proxyTLSVolume, MountPath: proxyTLSDir, ReadOnly: true},
		},
	}
}

func volumes() []corev1.Volume {
	mode := ptr.To[int32](0o644)
	return []corev1.Volume{
		{Name: machineSetWebhookVolume, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName:  machineSetWebhookSecret,
			DefaultMode: mode,
			Items:       []corev1.KeyToPath{{Key: "tls.crt", Path: "tls.crt"}, {Key: "tls.key", Path: "tls.key"}},
		}}},
		{Name: proxyConfigVolume, VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: proxyConfigMap},
			DefaultMode:          mode,
		}}},
		{Name: proxyTLSVolume, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName:  proxyTLSVolume,
			DefaultMode: mode,
		}}},
		{Name: trustedCAVolume, VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: TrustedCAConfigMap},
			Items:                []corev1.KeyToPath{{Key: TrustedCAKey, Path: "tls-ca-bundle.pem"}},
			Optional:             ptr.To(true),
		}}},
	}
}
