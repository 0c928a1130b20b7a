package main

import (
	"fmt"
	"os"
	"regexp"
	"strings"
)

// ImageName is the name the manifests give the provider's image, which
// config/image's `images:` entry replaces.
const ImageName = "machine-api-provider"

// digestRef is an image reference by digest: a repository (registry host,
// optional port, path) and a sha256 digest, no tag.
var digestRef = regexp.MustCompile(`^([a-z0-9]+(?:[._-][a-z0-9]+)*(?::[0-9]+)?(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)+)@(sha256:[0-9a-f]{64})$`)

// SplitDigestRef splits a reference by digest into its repository and
// digest, or fails on anything else (a tag, a short digest, no registry).
func SplitDigestRef(ref string) (repo, digest string, err error) {
	m := digestRef.FindStringSubmatch(ref)
	if m == nil {
		return "", "", fmt.Errorf("image %q: want <registry>/<repository>@sha256:<64 hex digits>", ref)
	}
	return m[1], m[2], nil
}

// imagesBlock is the `images:` list of a kustomization: the key and every
// line after it that is part of the list.
var imagesBlock = regexp.MustCompile(`(?m)^images:\n(?:(?:[ -].*)?\n)*`)

// Pin rewrites the `images:` list of the kustomization file (config/image)
// to name ref, an image by digest, for ImageName; the rest of the file (its
// comments, the replacements) stays as it is.
func Pin(file, ref string) error {
	repo, digest, err := SplitDigestRef(ref)
	if err != nil {
		return err
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	s := string(data)
	if n := len(imagesBlock.FindAllStringIndex(s, -1)); n != 1 {
		return fmt.Errorf("%s: %d `images:` lists, want one", file, n)
	}
	block := imagesBlock.FindString(s)
	// Keep the comment lines that end the block: they belong to what
	// follows it.
	var trailing []string
	lines := strings.Split(strings.TrimSuffix(block, "\n"), "\n")
	for len(lines) > 0 && strings.HasPrefix(strings.TrimSpace(lines[len(lines)-1]), "#") {
		trailing = append([]string{lines[len(lines)-1]}, trailing...)
		lines = lines[:len(lines)-1]
	}
	if !strings.Contains(block, "- name: "+ImageName+"\n") {
		return fmt.Errorf("%s: the `images:` list has no entry for %s", file, ImageName)
	}
	pinned := fmt.Sprintf("images:\n- name: %s\n  newName: %s\n  digest: %s\n", ImageName, repo, digest)
	for _, l := range trailing {
		pinned += l + "\n"
	}
	return writeFile(file, []byte(strings.Replace(s, block, pinned, 1)))
}
