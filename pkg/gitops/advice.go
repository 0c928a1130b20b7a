package gitops

import (
	"fmt"
	"strings"
)

// Advice is what to do about one GitOps owner around a journey.
type Advice struct {
	Owner Owner
	// Objects it keeps in sync among those the journey touches, and the
	// evidence for each.
	Objects []string
	// Pause are the commands that stop it acting, Resume those that let it
	// act again, in order; none when it does not act by itself. Or are
	// the same done otherwise, where the first way is not there (Argo CD
	// before 2.7).
	Pause, Resume, Or []string
	// State says what it does, as read: "automated sync, self-heal".
	State string
}

// Advise groups findings by owner, in the order first found, with the
// commands that pause and resume each. Argo CD Applications are paused
// with argocd.argoproj.io/skip-reconcile (Argo CD 2.7 and later; an app of
// apps' syncs keep an annotation they do not set), Flux's with
// spec.suspend, as `flux suspend` does.
func Advise(findings []Finding) []Advice {
	var out []Advice
	index := map[string]int{}
	for _, f := range findings {
		i, ok := index[f.Owner.key()]
		if !ok {
			i = len(out)
			index[f.Owner.key()] = i
			out = append(out, advice(f.Owner))
		}
		obj := f.Object + " (" + f.Evidence
		if f.SyncOptions != "" && !strings.Contains(f.Evidence, ArgoSyncOptions) {
			obj += "; " + ArgoSyncOptions + "=" + f.SyncOptions
		}
		out[i].Objects = append(out[i].Objects, obj+")")
	}
	return out
}

func advice(o Owner) Advice {
	a := Advice{Owner: o}
	switch {
	case o.Tool == Flux:
		a.State = "Flux applies it again at every interval"
		res := "kustomizations.kustomize.toolkit.fluxcd.io"
		if o.Kind == "HelmRelease" {
			res = "helmreleases.helm.toolkit.fluxcd.io"
		}
		ns, find := namespaceOf(o, res)
		a.Pause = append(find, fmt.Sprintf(`oc -n %s patch %s %s --type=merge -p '{"spec":{"suspend":true}}'`, ns, res, o.Name))
		a.Resume = []string{fmt.Sprintf(`oc -n %s patch %s %s --type=merge -p '{"spec":{"suspend":false}}'`, ns, res, o.Name)}
	case o.Name == "":
		a.State = "no tracking label or annotation names its Application: find it in Argo CD (argocd app list) and pause it (argocd.argoproj.io/skip-reconcile=true on it)"
	case o.Read && o.Skipped:
		a.State = "paused already (" + ArgoSkipReconcile + "=true)"
	case o.Read && !o.AutoSync:
		a.State = "no automated sync: it syncs only when someone syncs it; sync nothing of it until the journey is done"
	default:
		const res = "applications.argoproj.io"
		switch {
		case !o.Read:
			a.State = "its Application was not read: what it does is not known"
		case o.SelfHeal:
			a.State = "automated sync, self-heal: it undoes changes made in the cluster"
		default:
			a.State = "automated sync, no self-heal: it syncs again at the next commit"
		}
		ns, find := namespaceOf(o, res)
		a.Pause = append(find, fmt.Sprintf("oc -n %s annotate %s %s %s=true", ns, res, o.Name, ArgoSkipReconcile))
		a.Resume = []string{fmt.Sprintf("oc -n %s annotate %s %s %s-", ns, res, o.Name, ArgoSkipReconcile)}
		// Argo CD before 2.7 has no skip-reconcile: its automated sync
		// goes, and comes back as it was.
		a.Or = []string{fmt.Sprintf(`oc -n %s patch %s %s --type=json -p '[{"op":"remove","path":"/spec/syncPolicy/automated"}]'`, ns, res, o.Name)}
		if o.Automated != "" {
			a.Or = append(a.Or, fmt.Sprintf(`oc -n %s patch %s %s --type=merge -p '{"spec":{"syncPolicy":{"automated":%s}}}'   # to resume`, ns, res, o.Name, o.Automated))
		}
	}
	if o.Parent != nil {
		a.State += fmt.Sprintf("; the Application itself is kept by %s (the annotation outlives its syncs; a changed syncPolicy would not)", o.Parent)
	}
	return a
}

// namespaceOf is the owner's namespace for a command, and the command that
// finds it when nothing said it.
func namespaceOf(o Owner, resource string) (string, []string) {
	if o.Namespace != "" {
		return o.Namespace, nil
	}
	return `"$NS"`, []string{fmt.Sprintf("NS=$(oc get %s -A --field-selector metadata.name=%s -o jsonpath='{.items[0].metadata.namespace}')", resource, o.Name)}
}

// Lines is the advice as a plan prints it, each line to be prefixed.
func (a Advice) Lines() []string {
	out := []string{fmt.Sprintf("%s keeps %s: %s", a.Owner, strings.Join(a.Objects, ", "), a.State)}
	for _, c := range a.Pause {
		out = append(out, "  pause:  "+c)
	}
	for _, c := range a.Resume {
		out = append(out, "  resume: "+c)
	}
	for _, c := range a.Or {
		out = append(out, "  (Argo CD before 2.7: "+c+")")
	}
	return out
}

// Acts says whether the owner syncs by itself, or may (not read): what a
// journey must have paused before it changes what the owner keeps.
func (a Advice) Acts() bool { return len(a.Pause) > 0 }

// Lines are the lines of every owner's advice (Advise), as the plans print
// them after their prefix.
func Lines(findings []Finding) []string {
	var out []string
	for _, a := range Advise(findings) {
		out = append(out, a.Lines()...)
	}
	return out
}
