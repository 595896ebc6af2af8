package buildinfo

import (
	"runtime"
	"runtime/debug"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func TestFromBuildInfo(t *testing.T) {
	vcs := func(kv ...string) []debug.BuildSetting {
		var s []debug.BuildSetting
		for i := 0; i+1 < len(kv); i += 2 {
			s = append(s, debug.BuildSetting{Key: kv[i], Value: kv[i+1]})
		}
		return s
	}
	tests := []struct {
		name          string
		bi            debug.BuildInfo
		want          Info
		revisionLabel string
		line          string
	}{
		{
			name: "a tagged build from a checkout",
			bi: debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v1.4.0"},
				Settings: vcs("vcs", "git", "vcs.revision", "259b0e5c", "vcs.time", "2026-11-30T18:21:08Z", "vcs.modified", "false")},
			want:          Info{Version: "v1.4.0", Revision: "259b0e5c", Time: "2026-11-30T18:21:08Z", GoVersion: "go1.26.8"},
			revisionLabel: "259b0e5c",
			line:          "version v1.4.0, revision 259b0e5c of 2026-11-30T18:21:08Z, built with go1.26.8 for ",
		},
		{
			name: "a work tree with changes",
			bi: debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v1.4.1-0.20261130182108-259b0e5c+dirty"},
				Settings: vcs("vcs.revision", "259b0e5c", "vcs.modified", "true")},
			want:          Info{Version: "v1.4.1-0.20261130182108-259b0e5c+dirty", Revision: "259b0e5c", Modified: true, GoVersion: "go1.26.8"},
			revisionLabel: "259b0e5c-modified",
			line:          "version v1.4.1-0.20261130182108-259b0e5c+dirty, revision 259b0e5c (modified), built with go1.26.8 for ",
		},
		{
			name:          "built with -buildvcs=false",
			bi:            debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}},
			want:          Info{Version: "(devel)", Revision: Unknown, GoVersion: "go1.26.8"},
			revisionLabel: Unknown,
			line:          "version (devel), revision unknown, built with go1.26.8 for ",
		},
		{
			name:          "nothing recorded",
			bi:            debug.BuildInfo{},
			want:          Info{Version: Unknown, Revision: Unknown, GoVersion: runtime.Version()},
			revisionLabel: Unknown,
			line:          "version unknown, revision unknown, built with " + runtime.Version() + " for ",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := FromBuildInfo(&tt.bi)
			if got != tt.want {
				t.Errorf("FromBuildInfo = %+v, want %+v", got, tt.want)
			}
			if l := got.RevisionLabel(); l != tt.revisionLabel {
				t.Errorf("RevisionLabel = %q, want %q", l, tt.revisionLabel)
			}
			if s := got.String(); s != tt.line+runtime.GOOS+"/"+runtime.GOARCH {
				t.Errorf("String = %q, want %q", s, tt.line+runtime.GOOS+"/"+runtime.GOARCH)
			}
		})
	}
}

func TestReadNamesTheToolchain(t *testing.T) {
	in := Read()
	if in.GoVersion != runtime.Version() || in.Version == "" || in.Revision == "" {
		t.Fatalf("Read = %+v", in)
	}
}

func TestCollector(t *testing.T) {
	in := Info{Version: "(devel)", Revision: "259b0e5c", Modified: true, GoVersion: "go1.26.8"}
	reg := prometheus.NewRegistry()
	reg.MustRegister(in.Collector("x_build_info", "Which build is running (value 1)."))
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	if len(mfs) != 1 || mfs[0].GetName() != "x_build_info" || len(mfs[0].GetMetric()) != 1 {
		t.Fatalf("gathered %v", mfs)
	}
	m := mfs[0].GetMetric()[0]
	labels := map[string]string{}
	for _, l := range m.GetLabel() {
		labels[l.GetName()] = l.GetValue()
	}
	want := map[string]string{"version": "(devel)", "revision": "259b0e5c-modified", "go_version": "go1.26.8"}
	if len(labels) != len(want) || m.GetGauge().GetValue() != 1 {
		t.Fatalf("series %v = %v, want %v = 1", labels, m.GetGauge().GetValue(), want)
	}
	for k, v := range want {
		if labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, labels[k], v)
		}
	}
}
