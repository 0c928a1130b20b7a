// Package cloudscale implements the provider-neutral cloud.Cloud for
// cloudscale.ch with the official SDK.
//
// A Machine's server is found by two tags (machine name and cluster ID), never
// by its name, so that lost responses and restarts cannot make a Machine lose
// or double its server. Anti-affinity is done with server groups the provider
// creates and deletes itself, tagged with the cluster ID and the
// antiAffinityKey; groups the user lists in serverGroups carry no such tag and
// are never touched.
//
// Every API call goes through Client.call, which records metrics and turns
// SDK errors into the errors of package cloud. The API token and the user data
// never appear in an error or a log line.
package cloudscale
