package release

import (
	"archive/tar"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
)

// readImage unpacks an OCI layout tarball and returns its one image and the index's
// annotations of it.
func readImage(t *testing.T, file string) (v1.Image, map[string]string) {
	t.Helper()
	dir := t.TempDir()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if !filepath.IsLocal(h.Name) {
			t.Fatalf("layout entry %q escapes the layout", h.Name)
		}
		p := filepath.Join(dir, h.Name)
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
		case tar.TypeReg:
			data, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, data, 0o644); err != nil {
				t.Fatal(err)
			}
		default:
			t.Fatalf("layout entry %q of type %c", h.Name, h.Typeflag)
		}
	}
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Manifests) != 1 {
		t.Fatalf("the layout holds %d manifests, want 1", len(im.Manifests))
	}
	img, err := idx.Image(im.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	return img, im.Manifests[0].Annotations
}

// TestImages reads every image back: its config (user, entrypoint, ports, labels), its one
// layer (the binary alone, root's, not writable), and its size.
func TestImages(t *testing.T) {
	_, arts := testRelease(t)
	for _, d := range Daemons {
		t.Run(d.Command, func(t *testing.T) {
			file := artifact(t, arts, "image", d.Command)
			img, ann := readImage(t, file)
			mt, err := img.MediaType()
			if err != nil || mt != "application/vnd.oci.image.manifest.v1+json" {
				t.Errorf("manifest media type %q (%v), want OCI", mt, err)
			}
			cf, err := img.ConfigFile()
			if err != nil {
				t.Fatal(err)
			}
			c := cf.Config
			if cf.OS != "linux" || cf.Architecture != hostTarget.Arch {
				t.Errorf("platform %s/%s, want linux/%s", cf.OS, cf.Architecture, hostTarget.Arch)
			}
			if c.User != "65532:65532" {
				t.Errorf("user %q, want 65532:65532 (numeric, not root)", c.User)
			}
			if !slices.Equal(c.Entrypoint, []string{"/" + d.Command}) {
				t.Errorf("entrypoint %q", c.Entrypoint)
			}
			if !slices.Equal(c.Cmd, []string{"serve", "--config", "/etc/verdict/" + d.Configs[0].Name}) {
				t.Errorf("cmd %q", c.Cmd)
			}
			port := strconv.Itoa(d.Port) + "/tcp"
			if _, ok := c.ExposedPorts[port]; !ok || len(c.ExposedPorts) != 1 {
				t.Errorf("exposed ports %v, want only %s", c.ExposedPorts, port)
			}
			if !cf.Created.Time.Equal(testSource.Time) {
				t.Errorf("created %v, want the commit time %v", cf.Created.Time, testSource.Time)
			}
			labels := map[string]string{
				"org.opencontainers.image.title":    d.Command,
				"org.opencontainers.image.version":  testSource.Version,
				"org.opencontainers.image.revision": testSource.Revision,
				"org.opencontainers.image.created":  "2026-12-02T03:04:05Z",
				"org.opencontainers.image.source":   Homepage,
				"org.opencontainers.image.licenses": "Apache-2.0",
			}
			for k, v := range labels {
				if c.Labels[k] != v {
					t.Errorf("label %s = %q, want %q", k, c.Labels[k], v)
				}
				if ann[k] != v {
					t.Errorf("layout annotation %s = %q, want %q", k, ann[k], v)
				}
			}
			if ann["org.opencontainers.image.ref.name"] != testSource.Version {
				t.Errorf("ref.name = %q", ann["org.opencontainers.image.ref.name"])
			}

			layers, err := img.Layers()
			if err != nil {
				t.Fatal(err)
			}
			if len(layers) != 1 {
				t.Fatalf("%d layers, want 1", len(layers))
			}
			lmt, _ := layers[0].MediaType()
			if lmt != "application/vnd.oci.image.layer.v1.tar+gzip" {
				t.Errorf("layer media type %q", lmt)
			}
			rc, err := layers[0].Uncompressed()
			if err != nil {
				t.Fatal(err)
			}
			defer rc.Close()
			bin, err := os.ReadFile(artifact(t, arts, "binary", d.Command))
			if err != nil {
				t.Fatal(err)
			}
			tr := tar.NewReader(rc)
			var names []string
			for {
				h, err := tr.Next()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				names = append(names, h.Name)
				if h.Name != d.Command {
					continue
				}
				if h.Typeflag != tar.TypeReg || h.Mode != 0o555 || h.Uid != 0 || h.Gid != 0 {
					t.Errorf("%s: type %c mode %o owner %d:%d, want a regular file, 0555, 0:0", h.Name, h.Typeflag, h.Mode, h.Uid, h.Gid)
				}
				data, err := io.ReadAll(tr)
				if err != nil {
					t.Fatal(err)
				}
				if string(data) != string(bin) {
					t.Errorf("%s in the layer is not the released binary", h.Name)
				}
			}
			if !slices.Equal(names, []string{d.Command}) {
				t.Errorf("layer holds %q, want only %q (no shell, nothing else)", names, d.Command)
			}

			size, _ := layers[0].Size()
			fi, err := os.Stat(file)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s image: layer %.1f MiB compressed, binary %.1f MiB, layout tarball %.1f MiB",
				d.Command, float64(size)/(1<<20), float64(len(bin))/(1<<20), float64(fi.Size())/(1<<20))
		})
	}
}
