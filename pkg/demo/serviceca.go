package demo

// The service-ca operator's part: OpenShift gives a Service annotated
// service.beta.openshift.io/serving-cert-secret-name a Secret with a
// serving certificate for <service>.<namespace>.svc, and writes the CA that
// signed it into the caBundle of every webhook of a webhook configuration
// annotated service.beta.openshift.io/inject-cabundle. The
// cluster-autoscaler-operator relies on both: its Deployment mounts the
// Secret (it will not start without), and the API server calls its
// validating webhooks with that CA.

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/appuio/machine-api-provider/pkg/localcluster"
)

const (
	servingCertAnnotation   = "service.beta.openshift.io/serving-cert-secret-name"
	injectCABundleAnnotaton = "service.beta.openshift.io/inject-cabundle"
)

// run does the service-ca operator's work in namespace until ctx ends,
// looking every interval.
func runServiceCA(ctx context.Context, ca *localcluster.ServiceCA, c client.Client, namespace string, interval time.Duration, log logr.Logger) {
	for {
		if err := syncServiceCA(ctx, ca, c, namespace); err != nil && ctx.Err() == nil {
			log.Error(err, "service CA")
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(interval):
		}
	}
}

func syncServiceCA(ctx context.Context, ca *localcluster.ServiceCA, c client.Client, namespace string) error {
	var svcs corev1.ServiceList
	if err := c.List(ctx, &svcs, client.InNamespace(namespace)); err != nil {
		return err
	}
	for i := range svcs.Items {
		svc := &svcs.Items[i]
		name := svc.Annotations[servingCertAnnotation]
		if name == "" {
			continue
		}
		err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &corev1.Secret{})
		if err == nil {
			continue
		}
		if !apierrors.IsNotFound(err) {
			return err
		}
		crt, key, err := ca.Serving(svc.Name, svc.Namespace)
		if err != nil {
			return err
		}
		secret := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace,
				Annotations: map[string]string{"service.beta.openshift.io/originating-service-name": svc.Name}},
			Type: corev1.SecretTypeTLS,
			Data: map[string][]byte{corev1.TLSCertKey: crt, corev1.TLSPrivateKeyKey: key},
		}
		if err := c.Create(ctx, secret); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("the serving certificate of Service %s: %w", svc.Name, err)
		}
	}
	var hooks admissionregistrationv1.ValidatingWebhookConfigurationList
	if err := c.List(ctx, &hooks); err != nil {
		return err
	}
	for i := range hooks.Items {
		h := &hooks.Items[i]
		if h.Annotations[injectCABundleAnnotaton] != "true" {
			continue
		}
		changed := false
		for j := range h.Webhooks {
			if !bytes.Equal(h.Webhooks[j].ClientConfig.CABundle, ca.CertPEM) {
				h.Webhooks[j].ClientConfig.CABundle = ca.CertPEM
				changed = true
			}
		}
		if changed {
			if err := c.Update(ctx, h); err != nil && !apierrors.IsConflict(err) {
				return fmt.Errorf("the CA bundle of ValidatingWebhookConfiguration %s: %w", h.Name, err)
			}
		}
	}
	return nil
}
