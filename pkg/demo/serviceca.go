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
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"time"

	"github.com/go-logr/logr"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

const (
	servingCertAnnotation   = "service.beta.openshift.io/serving-cert-secret-name"
	injectCABundleAnnotaton = "service.beta.openshift.io/inject-cabundle"
)

// serviceCA is the signer of the serving certificates.
type serviceCA struct {
	cert    *x509.Certificate
	key     *ecdsa.PrivateKey
	certPEM []byte
}

func newServiceCA() (*serviceCA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "openshift-service-serving-signer (demo)"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &serviceCA{cert: cert, key: key, certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}, nil
}

// serve signs a certificate for a Service's DNS names.
func (ca *serviceCA) serve(svc *corev1.Service) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	host := svc.Name + "." + svc.Namespace + ".svc"
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: host},
		DNSNames:     []string{host, host + ".cluster.local"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), nil
}

// run does the service-ca operator's work in namespace until ctx ends,
// looking every interval.
func (ca *serviceCA) run(ctx context.Context, c client.Client, namespace string, interval time.Duration, log logr.Logger) {
	for {
		if err := ca.sync(ctx, c, namespace); err != nil && ctx.Err() == nil {
			log.Error(err, "service CA")
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(interval):
		}
	}
}

func (ca *serviceCA) sync(ctx context.Context, c client.Client, namespace string) error {
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
		crt, key, err := ca.serve(svc)
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
			if !bytes.Equal(h.Webhooks[j].ClientConfig.CABundle, ca.certPEM) {
				h.Webhooks[j].ClientConfig.CABundle = ca.certPEM
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
