package demo

import (
	"context"
	"encoding/base64"
	"fmt"

	configv1 "github.com/openshift/api/config/v1"
	"github.com/openshift/api/features"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/appuio/machine-api-provider/pkg/controllers/deployer"
)

// OpenShiftVersion is the release the local cluster says it runs (its
// ClusterVersion): the line of the machine-api-operator that go.mod pins,
// whose controllers the demo runs in-process.
var OpenShiftVersion = deployer.Library().String() + ".0"

// openShiftObjects creates what OpenShift would have: the Machine API
// namespace, the installer's worker user data, the Infrastructure object of a platform the
// machine-api-operator does not know, and what the
// cluster-autoscaler-operator reads at start: the ClusterVersion (the
// release), the FeatureGate (the release's Default feature set, as the
// cluster-config-operator writes it), the APIServer (its TLS profile) and
// the machine-api ClusterOperator (Available: it reports itself Degraded
// without).
func (e *Env) openShiftObjects(ctx context.Context) error {
	if err := e.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: Namespace}}); err != nil {
		return err
	}
	if err := e.Client.Create(ctx, WorkerUserData(e.Options.ClusterID)); err != nil {
		return err
	}
	infra := &configv1.Infrastructure{ObjectMeta: metav1.ObjectMeta{Name: "cluster"}}
	infra.Spec.PlatformSpec = e.Options.platformSpec()
	if err := e.Client.Create(ctx, infra); err != nil {
		return err
	}
	infra.Status = configv1.InfrastructureStatus{
		InfrastructureName:   e.Options.ClusterID,
		PlatformStatus:       e.Options.platformStatus(),
		ControlPlaneTopology: configv1.HighlyAvailableTopologyMode, InfrastructureTopology: configv1.HighlyAvailableTopologyMode,
	}
	if err := e.Client.Status().Update(ctx, infra); err != nil {
		return err
	}

	now := metav1.Now()
	image := "quay.io/openshift-release-dev/ocp-release:" + OpenShiftVersion + "-x86_64"
	cv := &configv1.ClusterVersion{
		ObjectMeta: metav1.ObjectMeta{Name: "version"},
		Spec:       configv1.ClusterVersionSpec{ClusterID: "2f2b6c4e-1d7a-4c1e-9a57-6f1c2d3e4f50", Channel: "stable-" + deployer.Library().String()},
	}
	if err := e.Client.Create(ctx, cv); err != nil {
		return err
	}
	cv.Status = configv1.ClusterVersionStatus{
		Desired:            configv1.Release{Version: OpenShiftVersion, Image: image},
		History:            []configv1.UpdateHistory{{State: configv1.CompletedUpdate, StartedTime: now, CompletionTime: &now, Version: OpenShiftVersion, Image: image, Verified: true}},
		ObservedGeneration: cv.Generation,
		VersionHash:        "demo",
	}
	if err := e.Client.Status().Update(ctx, cv); err != nil {
		return err
	}

	set, err := features.FeatureSets(features.SelfManaged, configv1.Default)
	if err != nil {
		return err
	}
	details := configv1.FeatureGateDetails{Version: OpenShiftVersion}
	for _, f := range set.Enabled {
		details.Enabled = append(details.Enabled, f.FeatureGateAttributes)
	}
	for _, f := range set.Disabled {
		details.Disabled = append(details.Disabled, f.FeatureGateAttributes)
	}
	gate := &configv1.FeatureGate{ObjectMeta: metav1.ObjectMeta{Name: "cluster"}}
	if err := e.Client.Create(ctx, gate); err != nil {
		return err
	}
	gate.Status.FeatureGates = []configv1.FeatureGateDetails{details}
	if err := e.Client.Status().Update(ctx, gate); err != nil {
		return fmt.Errorf("the FeatureGate's status: %w", err)
	}

	// the TLS profile (OpenShift's default, set explicitly), which the
	// cluster-autoscaler-operator reads, as 4.22's machineset-controller does
	if err := e.Client.Create(ctx, APIServer()); err != nil {
		return err
	}

	mapi := &configv1.ClusterOperator{ObjectMeta: metav1.ObjectMeta{Name: "machine-api"}}
	if err := e.Client.Create(ctx, mapi); err != nil {
		return err
	}
	mapi.Status.Conditions = []configv1.ClusterOperatorStatusCondition{
		{Type: configv1.OperatorAvailable, Status: configv1.ConditionTrue, LastTransitionTime: now},
		{Type: configv1.OperatorDegraded, Status: configv1.ConditionFalse, LastTransitionTime: now},
		{Type: configv1.OperatorProgressing, Status: configv1.ConditionFalse, LastTransitionTime: now},
	}
	mapi.Status.Versions = []configv1.OperandVersion{{Name: "operator", Version: OpenShiftVersion}}
	return e.Client.Status().Update(ctx, mapi)
}

// APIServer is the APIServer named cluster as an OpenShift cluster has it,
// with the TLS profile set explicitly to Intermediate, OpenShift's default.
// Read by the cluster-autoscaler-operator, by the machineset-controller from
// 4.22 (when not given the TLS flags) and by the deployer, which renders
// 4.22's TLS flags from it.
func APIServer() *configv1.APIServer {
	return &configv1.APIServer{
		ObjectMeta: metav1.ObjectMeta{Name: "cluster"},
		Spec: configv1.APIServerSpec{
			TLSSecurityProfile: &configv1.TLSSecurityProfile{
				Type: configv1.TLSProfileIntermediateType, Intermediate: &configv1.IntermediateTLSProfile{},
			},
			Audit: configv1.Audit{Profile: configv1.DefaultAuditProfileType},
		},
	}
}

// WorkerUserDataSecret is the Secret the installer makes with the workers'
// pointer Ignition (openshift/installer,
// 99_openshift-cluster-api_worker-user-data-secret.yaml), which the demo's
// MachineSets name, as the installer's and install-manifests' do.
const WorkerUserDataSecret = "worker-user-data"

// WorkerUserData is the installer's worker user data of a cluster: the
// pointer Ignition that fetches the worker config from the machine config
// server and trusts its CA, and sets no hostname. What names a Node is
// then the provider, which adds the Machine's name (pkg/userdata), or the
// cloud: the boot simulation reads it as the server boots (pkg/bootsim).
func WorkerUserData(clusterID string) *corev1.Secret {
	const ca = "-----BEGIN CERTIFICATE-----\nMIIBdemo\n-----END CERTIFICATE-----\n"
	pointer := fmt.Sprintf(`{"ignition":{"config":{"merge":[{"source":"https://api-int.%s.example.com:22623/config/worker"}]},"security":{"tls":{"certificateAuthorities":[{"source":"data:text/plain;charset=utf-8;base64,%s"}]}},"version":"3.2.0"}}`,
		clusterID, base64.StdEncoding.EncodeToString([]byte(ca)))
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: WorkerUserDataSecret, Namespace: Namespace},
		Data:       map[string][]byte{"userData": []byte(pointer), "disableTemplating": []byte("true")},
	}
}
