// Command podprobe is the container the pod runner's test runs: it prints
// what it finds (environment, mounted files, who the API server says its
// service account token is), then serves /healthz on $PORT ("serve") or
// ends with code 3 ("crash").
package main

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
)

func main() {
	for _, k := range []string{"FROM_SECRET", "FROM_FIELD", "FROM_CONFIGMAP", "EXPANDED", "HOSTNAME"} {
		fmt.Printf("env %s=%s\n", k, os.Getenv(k))
	}
	for _, f := range []string{"/etc/secret/a", "/etc/config/k", "/var/run/secrets/kubernetes.io/serviceaccount/namespace"} {
		data, err := os.ReadFile(f)
		fmt.Printf("file %s=%s (%v)\n", f, data, err)
	}
	fmt.Printf("args %q\n", os.Args[1:])
	fmt.Printf("user %s\n", whoami())
	if len(os.Args) > 1 && os.Args[1] == "crash" {
		fmt.Println("the last words")
		os.Exit(3)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	if err := http.ListenAndServe(":"+os.Getenv("PORT"), mux); err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
}

// whoami asks the API server who the mounted service account token is.
func whoami() string {
	dir := "/var/run/secrets/kubernetes.io/serviceaccount/"
	token, err := os.ReadFile(dir + "token")
	if err != nil {
		return err.Error()
	}
	ca, err := os.ReadFile(dir + "ca.crt")
	if err != nil {
		return err.Error()
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	url := "https://" + net.JoinHostPort(os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT")) +
		"/apis/authentication.k8s.io/v1/selfsubjectreviews"
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewBufferString(`{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}`))
	req.Header.Set("Authorization", "Bearer "+string(token))
	req.Header.Set("Content-Type", "application/json")
	res, err := client.Do(req)
	if err != nil {
		return err.Error()
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	var review struct {
		Status struct {
			UserInfo struct{ Username string } `json:"userInfo"`
		} `json:"status"`
	}
	if err := json.Unmarshal(body, &review); err != nil {
		return string(body)
	}
	return review.Status.UserInfo.Username
}
