package deploy

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/verdictgate/verdict/console"
	"github.com/verdictgate/verdict/executor"
	"github.com/verdictgate/verdict/internal/release"
	"github.com/verdictgate/verdict/internal/testing/testtool"
	"github.com/verdictgate/verdict/mcpgate"
	"github.com/verdictgate/verdict/verdictd"
)

const (
	chart      = "helm/verdict"
	helmModule = "helm.sh/helm/v3/cmd/helm@v3.22.0"
	// kubeVersion is the cluster helm template renders for: the chart needs 1.25 or newer
	// (Pod Security admission), and helm's offline default is older.
	kubeVersion = "1.30.0"
)

var helmBin struct {
	once sync.Once
	dir  string
	path string
	err  error
}

// helm returns a helm binary: the one on PATH, or one go install builds from helmModule (which
// needs the module proxy the first time). Without either the chart tests skip, or fail under
// VERDICT_CI=1 (see testtool).
func helm(t *testing.T) string {
	t.Helper()
	helmBin.once.Do(func() {
		if p, err := exec.LookPath("helm"); err == nil {
			helmBin.path = p
			return
		}
		if helmBin.dir, helmBin.err = os.MkdirTemp("", "verdict-helm-"); helmBin.err != nil {
			return
		}
		cmd := exec.Command("go", "install", helmModule)
		cmd.Env = append(os.Environ(), "GOBIN="+helmBin.dir, "GOFLAGS=")
		if out, err := cmd.CombinedOutput(); err != nil {
			helmBin.err = errors.New(string(out))
			return
		}
		helmBin.path = filepath.Join(helmBin.dir, "helm")
	})
	if helmBin.err != nil {
		testtool.Missing(t, fmt.Sprintf("helm is not on PATH and go install %s failed: %v", helmModule, helmBin.err))
	}
	return helmBin.path
}

func TestMain(m *testing.M) {
	code := m.Run()
	if helmBin.dir != "" {
		os.RemoveAll(helmBin.dir)
	}
	os.Exit(code)
}

// helmRun runs helm with a private home, so that no user's repositories or plugins count.
func helmRun(t *testing.T, args ...string) ([]byte, error) {
	t.Helper()
	home := t.TempDir()
	cmd := exec.Command(helm(t), args...)
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+home, "HELM_CONFIG_HOME="+home, "HELM_DATA_HOME="+home)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, errors.New(err.Error() + ": " + stderr.String())
	}
	return out, nil
}

// chartCases are the values helm lint and helm template run with.
var chartCases = []struct{ name, values string }{
	{"default", ""},
	{"replicas on etcd", "ci/replicas-etcd-values.yaml"},
	{"gateway", "ci/gateway-values.yaml"},
	{"console", "ci/console-values.yaml"},
}

func valuesArgs(values string) []string {
	if values == "" {
		return nil
	}
	return []string{"--values", filepath.Join(chart, values)}
}

func TestChartLint(t *testing.T) {
	for _, c := range chartCases {
		t.Run(c.name, func(t *testing.T) {
			if out, err := helmRun(t, append([]string{"lint", "--strict", "--kube-version", kubeVersion, chart}, valuesArgs(c.values)...)...); err != nil {
				t.Fatalf("helm lint: %v\n%s", err, out)
			}
		})
	}
}

// object is one rendered Kubernetes object.
type object map[string]any

func (o object) kind() string { s, _ := o["kind"].(string); return s }
func (o object) name() string { return dig[string](o, "metadata", "name") }

func dig[T any](v any, path ...any) T {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, _ := v.(map[string]any)
			if m == nil {
				if o, ok := v.(object); ok {
					m = o
				}
			}
			v = m[k]
		case int:
			l, _ := v.([]any)
			if k >= len(l) {
				v = nil
			} else {
				v = l[k]
			}
		}
	}
	t, _ := v.(T)
	return t
}

func render(t *testing.T, values string, set ...string) ([]object, error) {
	t.Helper()
	var args []string
	for _, s := range set {
		args = append(args, "--set", s)
	}
	return renderArgs(t, append(valuesArgs(values), args...)...)
}

// renderArgs renders the chart with helm template's own flags (--values, --set, --set-json).
func renderArgs(t *testing.T, flags ...string) ([]object, error) {
	t.Helper()
	args := append([]string{"template", "r", chart, "--namespace", "verdict", "--kube-version", kubeVersion}, flags...)
	out, err := helmRun(t, args...)
	if err != nil {
		return nil, err
	}
	var objs []object
	dec := yaml.NewDecoder(bytes.NewReader(out))
	for {
		// Into a plain map: decoding into object would make every nested map an object too.
		var m map[string]any
		if err := dec.Decode(&m); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("helm template output: %v", err)
		}
		if m != nil {
			objs = append(objs, object(m))
		}
	}
	return objs, nil
}

// TestChartTemplate renders the chart and checks what the deployment relies on: restricted pods,
// a ServiceAccount each, probes, configs the daemons load, and network policies under which
// the executor alone reaches the tool servers.
func TestChartTemplate(t *testing.T) {
	for _, c := range chartCases {
		t.Run(c.name, func(t *testing.T) {
			objs, err := render(t, c.values)
			if err != nil {
				t.Fatal(err)
			}
			byKind := map[string][]object{}
			for _, o := range objs {
				byKind[o.kind()] = append(byKind[o.kind()], o)
			}
			workloads := append(byKind["StatefulSet"], byKind["Deployment"]...)
			want := 2
			if c.values == "ci/gateway-values.yaml" || c.values == "ci/console-values.yaml" {
				want = 3
			}
			if len(workloads) != want {
				t.Fatalf("%d workloads, want %d", len(workloads), want)
			}
			accounts := map[string]bool{}
			for _, w := range workloads {
				checkPod(t, w)
				sa := dig[string](w, "spec", "template", "spec", "serviceAccountName")
				if accounts[sa] {
					t.Errorf("%s shares ServiceAccount %s", w.name(), sa)
				}
				accounts[sa] = true
			}
			if len(byKind["ServiceAccount"]) != len(workloads) {
				t.Errorf("%d ServiceAccounts for %d workloads", len(byKind["ServiceAccount"]), len(workloads))
			}
			checkConfigs(t, byKind["Secret"])
			checkNetworkPolicies(t, byKind["NetworkPolicy"], len(workloads))
			if c.values == "ci/console-values.yaml" {
				checkConsole(t, objs)
			}
		})
	}
}

func checkPod(t *testing.T, w object) {
	t.Helper()
	pod := dig[map[string]any](w, "spec", "template", "spec")
	if dig[bool](pod, "automountServiceAccountToken") {
		t.Errorf("%s mounts a service account token", w.name())
	}
	if !dig[bool](pod, "securityContext", "runAsNonRoot") || dig[string](pod, "securityContext", "seccompProfile", "type") != "RuntimeDefault" {
		t.Errorf("%s pod security context is not restricted: %v", w.name(), pod["securityContext"])
	}
	containers := dig[[]any](pod, "containers")
	if len(containers) != 1 {
		t.Fatalf("%s has %d containers", w.name(), len(containers))
	}
	c := containers[0]
	sc := dig[map[string]any](c, "securityContext")
	if dig[bool](sc, "allowPrivilegeEscalation") || !dig[bool](sc, "readOnlyRootFilesystem") ||
		dig[string](sc, "capabilities", "drop", 0) != "ALL" {
		t.Errorf("%s container security context is not restricted: %v", w.name(), sc)
	}
	if dig[string](c, "livenessProbe", "httpGet", "path") != "/healthz" || dig[string](c, "readinessProbe", "httpGet", "path") != "/readyz" {
		t.Errorf("%s probes: liveness %v, readiness %v", w.name(), dig[any](c, "livenessProbe"), dig[any](c, "readinessProbe"))
	}
	// caBundle adds to the roots built into the daemons; SSL_CERT_FILE would replace them.
	env := map[string]string{}
	for _, e := range dig[[]any](c, "env") {
		env[dig[string](e, "name")] = dig[string](e, "value")
	}
	if _, ok := env["SSL_CERT_FILE"]; ok {
		t.Errorf("%s sets SSL_CERT_FILE, which replaces the roots the daemons trust", w.name())
	}
	var caVolume bool
	for _, v := range dig[[]any](pod, "volumes") {
		caVolume = caVolume || dig[string](v, "name") == "ca"
	}
	if extra := env["VERDICT_EXTRA_CA_FILE"]; caVolume != (extra == "/etc/verdict/ca/ca.crt") {
		t.Errorf("%s: CA volume %v, VERDICT_EXTRA_CA_FILE %q", w.name(), caVolume, extra)
	}
}

// checkConfigs loads every rendered daemon config with the daemon's own loader.
func checkConfigs(t *testing.T, secrets []object) {
	t.Helper()
	dir := t.TempDir()
	loaded := 0
	for _, s := range secrets {
		for key, v := range dig[map[string]any](s, "stringData") {
			load := map[string]func(string) error{
				"verdictd.yaml": func(p string) error { _, err := verdictd.LoadConfig(p); return err },
				"executor.yaml": func(p string) error { _, err := executor.LoadConfig(p); return err },
				"mcpgate.yaml":  func(p string) error { _, err := mcpgate.LoadConfig(p); return err },
			}[key]
			if load == nil {
				continue
			}
			p := filepath.Join(dir, key)
			if err := os.WriteFile(p, []byte(v.(string)), 0o600); err != nil {
				t.Fatal(err)
			}
			err := load(p)
			if err != nil {
				t.Errorf("rendered %s does not load: %v\n%s", key, err, v)
			}
			loaded++
		}
	}
	if loaded < 2 {
		t.Errorf("found %d daemon configs in the rendered Secrets, want at least 2", loaded)
	}
}

// checkNetworkPolicies checks that every workload has a policy for both directions, and that
// only the executor's egress names tool-server peers (anything beyond DNS, etcd and the
// chart's own pods), and the console's the OpenID Provider (checkConsole).
func checkNetworkPolicies(t *testing.T, policies []object, workloads int) {
	t.Helper()
	if len(policies) != workloads {
		t.Errorf("%d NetworkPolicies for %d workloads", len(policies), workloads)
	}
	for _, p := range policies {
		types := dig[[]any](p, "spec", "policyTypes")
		if len(types) != 2 {
			t.Errorf("%s policyTypes %v, want Ingress and Egress", p.name(), types)
		}
		for _, rule := range dig[[]any](p, "spec", "egress") {
			for _, peer := range dig[[]any](rule, "to") {
				if dig[map[string]any](peer, "ipBlock") != nil && !strings.HasSuffix(p.name(), "-executor") && !strings.HasSuffix(p.name(), "-console") {
					t.Errorf("%s lets its pods reach %v: only the executor reaches tool servers", p.name(), peer)
				}
			}
		}
	}
}

// TestChartImagesAreReleased renders the chart with the default values and with every values
// file under ci/, and checks that each container's image is one the release builds: the
// values' registry, a daemon's image name (its command: the image's
// org.opencontainers.image.title), and the chart's appVersion as the tag.
func TestChartImagesAreReleased(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(chart, "ci", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatalf("no values files under %s/ci", chart)
	}
	values := []string{""}
	for _, f := range files {
		rel, err := filepath.Rel(chart, f)
		if err != nil {
			t.Fatal(err)
		}
		values = append(values, rel)
	}
	var meta struct {
		AppVersion string `yaml:"appVersion"`
	}
	readYAML(t, filepath.Join(chart, "Chart.yaml"), &meta)
	var defaults struct {
		Image struct{ Registry, Tag string }
	}
	readYAML(t, filepath.Join(chart, "values.yaml"), &defaults)
	if defaults.Image.Tag != "" {
		t.Fatalf("values.yaml sets image.tag %q; the test expects the appVersion", defaults.Image.Tag)
	}
	released := map[string]bool{}
	var names []string
	for _, d := range release.Daemons {
		released[d.Command] = true
		names = append(names, d.Command)
	}
	used := map[string]bool{}
	for _, v := range values {
		t.Run(cmp.Or(v, "default"), func(t *testing.T) {
			objs, err := render(t, v)
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for _, o := range objs {
				if o.kind() != "StatefulSet" && o.kind() != "Deployment" {
					continue
				}
				pod := dig[map[string]any](o, "spec", "template", "spec")
				for _, field := range []string{"initContainers", "containers"} {
					for _, c := range dig[[]any](pod, field) {
						n++
						image := dig[string](c, "image")
						ref, tag, _ := strings.Cut(image, ":")
						registry, name := path.Split(ref)
						switch {
						case !released[name]:
							t.Errorf("%s %s runs image %q: the release builds no image %q (it builds %v)", o.kind(), o.name(), image, name, names)
						case strings.TrimSuffix(registry, "/") != defaults.Image.Registry:
							t.Errorf("%s %s runs image %q, not from the registry %q", o.kind(), o.name(), image, defaults.Image.Registry)
						case tag != meta.AppVersion:
							t.Errorf("%s %s runs image %q, not tagged with the appVersion %q", o.kind(), o.name(), image, meta.AppVersion)
						}
						used[name] = true
					}
				}
			}
			if n == 0 {
				t.Error("no containers rendered")
			}
		})
	}
	// Between them, the values files run every daemon the release builds.
	for name := range released {
		if !used[name] {
			t.Errorf("no values file runs the %s image", name)
		}
	}
}

func readYAML(t *testing.T, file string, v any) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
}

// TestChartRefuses renders values that would be unsafe and expects helm to refuse them.
func TestChartRefuses(t *testing.T) {
	tests := []struct {
		name string
		set  []string
		want string
	}{
		{"verdictd replicas on bbolt", []string{"verdictd.replicas=2"}, "state_store.kind: etcd"},
		{"executor replicas on bbolt", []string{"executor.replicas=2"}, "nonce_store.kind: etcd"},
		{"no signing key", []string{"verdictd.existingSecret="}, "signing key"},
		{"an unknown value", []string{"verdictd.replicaz=1"}, "replicaz"},
		{"the chart's own config key", []string{"verdictd.config.signing_key=/tmp/k"}, "/verdictd/config"},
		{"gateway without tokens", []string{"gateway.enabled=true"}, "caller tokens"},
		{"console without https to verdictd", []string{"console.enabled=true"}, "https only"},
		{"console without its provider's peers", []string{"console.enabled=true", "verdictd.tlsSecret=v", "executor.tlsSecret=x"}, "console.identityProvider"},
		{"console without tokens", []string{"console.enabled=true", "verdictd.tlsSecret=v", "executor.tlsSecret=x",
			"console.existingSecret=", "console.identityProvider[0].to[0].ipBlock.cidr=198.51.100.10/32"}, "console needs its tokens"},
		{"the console's own config key", []string{"console.config.oidc.client_secret_file=/tmp/s"}, "/console/config"},
		{"console replicas with sessions in memory", []string{"console.enabled=true", "console.replicas=2"}, "session.store.kind: etcd"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := render(t, "", tt.set...)
			if err == nil {
				t.Fatalf("helm template --set %v succeeded", tt.set)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("helm template --set %v: %v, want it to say %q", tt.set, err, tt.want)
			}
		})
	}
}

// TestChartAlertsAreTheRules checks that the chart's PrometheusRule carries the rules file
// itself (a chart cannot read files outside it, so it holds a copy).
func TestChartAlertsAreTheRules(t *testing.T) {
	a, err := os.ReadFile(filepath.Join("prometheus", "alerts.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(chart, "files", "alerts.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Error("deploy/helm/verdict/files/alerts.yaml differs from deploy/prometheus/alerts.yaml: copy it")
	}
}

// TestChartScraper checks who may scrape the daemons: by default the Prometheus pods of the
// namespace monitoring (its kubernetes.io/metadata.name label, which Kubernetes sets), so that
// a Prometheus in another namespace than the release's gets through the NetworkPolicies;
// namespaceSelector: null is the release's namespace only (the peer carries no
// namespaceSelector, where one of {} would be every namespace in Kubernetes); and the ServiceMonitors carry the labels a
// Prometheus selects them by and select the Services of their own namespace.
func TestChartScraper(t *testing.T) {
	monitoring := map[string]any{"matchLabels": map[string]any{"kubernetes.io/metadata.name": "monitoring"}}
	tests := []struct {
		name  string
		flags []string
		// want is the scraper peer's namespaceSelector; nil: the peer has none.
		want map[string]any
	}{
		{"default", nil, monitoring},
		// helm merges a map given in values into the default's: {} leaves the default as it is,
		// and null removes it.
		{"{} merges into the default", []string{"--set-json", "metrics.scraper.namespaceSelector={}"}, monitoring},
		{"null: release namespace only", []string{"--set-json", "metrics.scraper.namespaceSelector=null"}, nil},
		{"named namespace", []string{"--set-json", `metrics.scraper.namespaceSelector={"matchLabels":{"kubernetes.io/metadata.name":"obs"}}`},
			map[string]any{"matchLabels": map[string]any{"kubernetes.io/metadata.name": "obs"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			flags := append(valuesArgs("ci/gateway-values.yaml"), tt.flags...)
			objs, err := renderArgs(t, flags...)
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for _, p := range objs {
				if p.kind() != "NetworkPolicy" {
					continue
				}
				n++
				var found bool
				for _, rule := range dig[[]any](p, "spec", "ingress") {
					for _, peer := range dig[[]any](rule, "from") {
						if dig[string](peer, "podSelector", "matchLabels", "app.kubernetes.io/name") != "prometheus" {
							continue
						}
						found = true
						got := dig[map[string]any](peer, "namespaceSelector")
						if _, present := peer.(map[string]any)["namespaceSelector"]; present != (tt.want != nil) || !sameYAML(got, tt.want) {
							t.Errorf("%s: the scraper's namespaceSelector is %v (present %v), want %v", p.name(), got, present, tt.want)
						}
						if port := dig[string](rule, "ports", 0, "port"); port != "http" {
							t.Errorf("%s: the scraper is let in on port %q, want http (the port /metrics is on)", p.name(), port)
						}
					}
				}
				if !found {
					t.Errorf("%s admits no Prometheus pods", p.name())
				}
			}
			if n != 3 {
				t.Errorf("%d NetworkPolicies, want 3", n)
			}
		})
	}

	objs, err := render(t, "ci/gateway-values.yaml", "metrics.serviceMonitor.enabled=true", "metrics.serviceMonitor.labels.release=kube-prometheus-stack",
		"metrics.prometheusRule.enabled=true", "metrics.prometheusRule.labels.release=kube-prometheus-stack")
	if err != nil {
		t.Fatal(err)
	}
	monitors := 0
	for _, o := range objs {
		switch o.kind() {
		case "ServiceMonitor":
			monitors++
			if dig[any](o, "spec", "namespaceSelector") != nil {
				t.Errorf("ServiceMonitor %s has a namespaceSelector: it should select the release's namespace", o.name())
			}
			fallthrough
		case "PrometheusRule":
			if got := dig[string](o, "metadata", "labels", "release"); got != "kube-prometheus-stack" {
				t.Errorf("%s %s has label release=%q, want the value's", o.kind(), o.name(), got)
			}
			if dig[string](o, "metadata", "labels", "app.kubernetes.io/instance") == "" {
				t.Errorf("%s %s lost the chart's own labels", o.kind(), o.name())
			}
		}
	}
	if monitors != 3 {
		t.Errorf("%d ServiceMonitors, want 3", monitors)
	}
}

// sameYAML compares two decoded YAML values.
func sameYAML(a, b map[string]any) bool {
	x, err1 := yaml.Marshal(a)
	y, err2 := yaml.Marshal(b)
	return err1 == nil && err2 == nil && bytes.Equal(x, y)
}

// podRoot lays out what w's container sees under /etc/verdict/ in a new directory, from the
// volumes it mounts there: each item of a rendered Secret or ConfigMap with its value, each
// item of one made beforehand (existingSecret) with a placeholder. It returns the directory
// and the path the container's --config names.
func podRoot(t *testing.T, objs []object, w object) (root, config string) {
	t.Helper()
	root = t.TempDir()
	data := map[string]map[string]any{} // "Secret/name" → its keys
	for _, o := range objs {
		switch o.kind() {
		case "Secret":
			data["Secret/"+o.name()] = dig[map[string]any](o, "stringData")
		case "ConfigMap":
			data["ConfigMap/"+o.name()] = dig[map[string]any](o, "data")
		}
	}
	pod := dig[map[string]any](w, "spec", "template", "spec")
	volumes := map[string]any{}
	for _, v := range dig[[]any](pod, "volumes") {
		volumes[dig[string](v, "name")] = v
	}
	c := dig[any](pod, "containers", 0)
	for _, m := range dig[[]any](c, "volumeMounts") {
		v := volumes[dig[string](m, "name")]
		if v == nil {
			t.Fatalf("%s mounts volume %q, which it does not have", w.name(), dig[string](m, "name"))
		}
		var src string
		var items []any
		switch {
		case dig[map[string]any](v, "secret") != nil:
			src, items = "Secret/"+dig[string](v, "secret", "secretName"), dig[[]any](v, "secret", "items")
		case dig[map[string]any](v, "configMap") != nil:
			src, items = "ConfigMap/"+dig[string](v, "configMap", "name"), dig[[]any](v, "configMap", "items")
		default:
			continue
		}
		dir := filepath.Join(root, dig[string](m, "mountPath"))
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		rendered, made := data[src]
		files := map[string]string{}
		for _, it := range items {
			key := dig[string](it, "key")
			val, ok := rendered[key].(string)
			switch {
			case !made:
				val = "placeholder\n"
			case !ok:
				t.Fatalf("%s mounts key %q of %s, which has no such key", w.name(), key, src)
			}
			files[dig[string](it, "path")] = val
		}
		if len(items) == 0 {
			for k, v := range rendered {
				files[k], _ = v.(string)
			}
		}
		for name, val := range files {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(val), 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	args := dig[[]any](c, "args")
	for i, a := range args {
		if a == "--config" && i+1 < len(args) {
			config, _ = args[i+1].(string)
		}
	}
	if config == "" {
		t.Fatalf("%s names no --config: %v", w.name(), args)
	}
	return root, config
}

// checkConsole checks the console as the chart renders it: two replicas rolling, their sessions
// in etcd; its config, rendered into a Secret,
// loads with the console's own loader as the pod sees it (the loader opens every file the
// config names: podRoot lays them out from the pod's mounts, so that it loads exactly when
// the config names what the pod mounts); its NetworkPolicy lets it reach DNS, verdictd's and
// the executor's ports, etcd and the provider alone, and be reached by the ingress controller and
// the scraper; verdictd and the executor let it in; its Ingress routes the pages of
// docs/console.md to it and nothing else of its listener.
func checkConsole(t *testing.T, objs []object) {
	t.Helper()
	byName := map[string]object{}
	for _, o := range objs {
		byName[o.kind()+"/"+o.name()] = o
	}
	const name = "r-verdict-console"
	w := byName["Deployment/"+name]
	if w == nil {
		t.Fatalf("no Deployment %s", name)
	}
	if r, s := dig[int](w, "spec", "replicas"), dig[string](w, "spec", "strategy", "type"); r != 2 || s != "RollingUpdate" {
		t.Errorf("%d console replicas, strategy %q: its sessions are in etcd, want 2 rolling", r, s)
	}
	root, config := podRoot(t, objs, w)
	b, err := os.ReadFile(filepath.Join(root, config))
	if err != nil {
		t.Fatalf("the console's --config %s is not mounted: %v", config, err)
	}
	p := filepath.Join(t.TempDir(), "console.yaml")
	if err := os.WriteFile(p, bytes.ReplaceAll(b, []byte("/etc/verdict/"), []byte(root+"/etc/verdict/")), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := console.LoadConfig(p)
	if err != nil {
		t.Fatalf("rendered console.yaml does not load as the pod sees it: %v\n%s", err, b)
	}
	if cfg.OIDC.ClientSecretFile == "" || cfg.Verdictd.URL != "https://r-verdict-verdictd.verdict.svc:8780" || cfg.Executor.URL != "https://r-verdict-executor.verdict.svc:8781" {
		t.Errorf("console config: client secret %q, verdictd %q, executor %q", cfg.OIDC.ClientSecretFile, cfg.Verdictd.URL, cfg.Executor.URL)
	}
	if cfg.Session.Store.Kind != console.SessionStoreEtcd {
		t.Errorf("console config: session store %q, want etcd for two replicas", cfg.Session.Store.Kind)
	}

	pol := byName["NetworkPolicy/"+name]
	consolePods := map[string]any{"matchLabels": map[string]any{"app.kubernetes.io/name": "verdict", "app.kubernetes.io/instance": "r", "app.kubernetes.io/component": "console"}}
	from := dig[[]any](pol, "spec", "ingress", 0, "from")
	if len(dig[[]any](pol, "spec", "ingress")) != 1 || len(from) != 2 ||
		dig[string](from[0], "podSelector", "matchLabels", "app.kubernetes.io/name") != "ingress-nginx" ||
		dig[string](from[1], "podSelector", "matchLabels", "app.kubernetes.io/name") != "prometheus" {
		t.Errorf("the console is reached by %v, want the ingress controller and the scraper", dig[any](pol, "spec", "ingress"))
	}
	var egress []string
	for _, rule := range dig[[]any](pol, "spec", "egress") {
		for _, peer := range dig[[]any](rule, "to") {
			for _, port := range dig[[]any](rule, "ports") {
				to := dig[string](peer, "ipBlock", "cidr")
				if to == "" {
					to = cmp.Or(dig[string](peer, "podSelector", "matchLabels", "app.kubernetes.io/component"), dig[string](peer, "podSelector", "matchLabels", "k8s-app"),
						dig[string](peer, "podSelector", "matchLabels", "app"))
				}
				egress = append(egress, fmt.Sprintf("%s:%v/%s", to, dig[any](port, "port"), dig[string](port, "protocol")))
			}
		}
	}
	want := []string{"kube-dns:53/UDP", "kube-dns:53/TCP", "verdictd:8780/TCP", "executor:8781/TCP", "etcd:2379/TCP", "198.51.100.10/32:443/TCP"}
	if strings.Join(egress, " ") != strings.Join(want, " ") {
		t.Errorf("the console reaches %v, want %v", egress, want)
	}
	for _, peer := range []string{"verdictd", "executor"} {
		var admitted bool
		for _, f := range dig[[]any](byName["NetworkPolicy/r-verdict-"+peer], "spec", "ingress", 0, "from") {
			admitted = admitted || sameYAML(dig[map[string]any](f, "podSelector"), consolePods)
		}
		if !admitted {
			t.Errorf("%s's NetworkPolicy does not let the console in", peer)
		}
	}

	ing := byName["Ingress/"+name]
	if h := dig[string](ing, "spec", "rules", 0, "host"); h != "console.example.org" || dig[string](ing, "spec", "tls", 0, "hosts", 0) != h {
		t.Errorf("the Ingress is for host %q (tls %v), want public_url's", h, dig[any](ing, "spec", "tls"))
	}
	routed := func(path string) bool {
		for _, p := range dig[[]any](ing, "spec", "rules", 0, "http", "paths") {
			prefix := dig[string](p, "path")
			switch dig[string](p, "pathType") {
			case "Exact":
				if path == prefix {
					return true
				}
			case "Prefix":
				if path == prefix || strings.HasPrefix(path, prefix+"/") {
					return true
				}
			}
		}
		return false
	}
	for _, page := range consolePages(t) {
		internal := page == "/metrics" || page == "/healthz" || page == "/readyz"
		if routed(page) == internal {
			t.Errorf("the Ingress routes %s: %v, want %v", page, routed(page), !internal)
		}
	}
}

// consolePages are the paths of the routes docs/console.md's Pages table lists, a path
// parameter standing as x.
func consolePages(t *testing.T) []string {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join("..", "docs", "console.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, table, _ := strings.Cut(string(doc), "\n## Pages\n")
	table, _, _ = strings.Cut(table, "\n## ")
	var pages []string
	for _, m := range regexp.MustCompile("`(?:GET|POST) (/[^`]*)`").FindAllStringSubmatch(table, -1) {
		pages = append(pages, regexp.MustCompile(`\{[^}]*\}`).ReplaceAllString(m[1], "x"))
	}
	if len(pages) < 10 {
		t.Fatalf("docs/console.md's Pages table lists %d routes: %v", len(pages), pages)
	}
	return pages
}
