package release

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// ImageUID and ImageGID are the user and group an image runs as: not root, and no name, since
// the image has no /etc/passwd. 65532 is the conventional "nonroot" id of distroless images,
// which Kubernetes' runAsNonRoot accepts because it is numeric.
const (
	ImageUID = 65532
	ImageGID = 65532
)

// ImageRefName is the org.opencontainers.image.ref.name of an image in its layout: the tag it
// is loaded as (skopeo copy oci-archive:FILE:TAG, podman load).
func ImageRefName(src Source) string { return src.Version }

// ImageFileName is the image's OCI layout tarball in dist/.
func ImageFileName(d Daemon, src Source, t Target) string {
	return fmt.Sprintf("%s_%s_%s_%s.oci.tar", d.Command, src.Version, t.OS, t.Arch)
}

// BuildImage writes d's image for t, holding binary, as an OCI layout tarball at out. The image
// is built from nothing (no base image, no shell, no libc): one layer whose only entry is the
// binary at /<command>, root-owned and mode 0555, so that the user it runs as cannot change it.
func BuildImage(d Daemon, src Source, t Target, binary, out string) (v1.Image, error) {
	layer, err := binaryLayer(d.Command, binary, src.Time)
	if err != nil {
		return nil, fmt.Errorf("image %s: %w", d.Command, err)
	}
	img, err := mutate.AppendLayers(mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON), layer)
	if err != nil {
		return nil, fmt.Errorf("image %s: %w", d.Command, err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("image %s: %w", d.Command, err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = t.OS, t.Arch
	cf.Created = v1.Time{Time: src.Time}
	cf.Author = Homepage
	port := strconv.Itoa(d.Port) + "/tcp"
	cf.Config = v1.Config{
		User:         fmt.Sprintf("%d:%d", ImageUID, ImageGID),
		Entrypoint:   []string{"/" + d.Command},
		Cmd:          []string{"serve", "--config", "/etc/verdict/" + d.Configs[0].Name},
		ExposedPorts: map[string]struct{}{port: {}},
		WorkingDir:   "/",
		Env:          []string{"PATH=/"},
		StopSignal:   "SIGTERM",
		Labels:       imageLabels(d, src),
	}
	cf.History = []v1.History{{Created: cf.Created, CreatedBy: "deploy/release: /" + d.Command, Comment: "the static binary"}}
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return nil, fmt.Errorf("image %s: %w", d.Command, err)
	}
	annotations := imageLabels(d, src)
	annotations["org.opencontainers.image.ref.name"] = ImageRefName(src)
	if err := writeLayoutTar(img, annotations, out); err != nil {
		return nil, fmt.Errorf("image %s: %w", d.Command, err)
	}
	return img, nil
}

// imageLabels are the OCI annotations of the image, as its config's labels and in its layout.
func imageLabels(d Daemon, src Source) map[string]string {
	return map[string]string{
		"org.opencontainers.image.title":       d.Command,
		"org.opencontainers.image.description": d.Summary,
		"org.opencontainers.image.version":     src.Version,
		"org.opencontainers.image.revision":    src.Revision,
		"org.opencontainers.image.created":     src.Time.UTC().Format(time.RFC3339),
		"org.opencontainers.image.source":      Homepage,
		"org.opencontainers.image.url":         Homepage,
		"org.opencontainers.image.vendor":      "verdict",
		"org.opencontainers.image.licenses":    License,
	}
}

// binaryLayer is an uncompressed-then-gzipped tar holding the binary alone.
func binaryLayer(name, binary string, mtime time.Time) (v1.Layer, error) {
	data, err := os.ReadFile(binary)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	hdr := &tar.Header{
		Typeflag: tar.TypeReg,
		Name:     name,
		Mode:     0o555,
		Size:     int64(len(data)),
		ModTime:  mtime,
		Uid:      0,
		Gid:      0,
		Format:   tar.FormatPAX,
	}
	if err := tw.WriteHeader(hdr); err != nil {
		return nil, err
	}
	if _, err := tw.Write(data); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	b := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(b)), nil
	}, tarball.WithMediaType(types.OCILayer))
}

// writeLayoutTar writes img as an OCI image layout (one image in index.json) and packs the
// layout into one tar file at out, its entries in a fixed order with the image's time.
func writeLayoutTar(img v1.Image, annotations map[string]string, out string) error {
	dir, err := os.MkdirTemp("", "verdict-oci-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	if err := p.AppendImage(img, layout.WithAnnotations(annotations)); err != nil {
		return err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return err
	}
	return tarDir(dir, out, cf.Created.Time)
}

// tarDir packs dir into the tar file out: regular files and directories, paths in lexical order
// (filepath.WalkDir's), owned by root, with mtime.
func tarDir(dir, out string, mtime time.Time) error {
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(f)
	err = filepath.WalkDir(dir, func(path string, e fs.DirEntry, err error) error {
		if err != nil || path == dir {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		hdr := &tar.Header{Name: filepath.ToSlash(rel), ModTime: mtime, Format: tar.FormatPAX}
		if e.IsDir() {
			hdr.Typeflag, hdr.Name, hdr.Mode = tar.TypeDir, hdr.Name+"/", 0o755
			return tw.WriteHeader(hdr)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		hdr.Typeflag, hdr.Mode, hdr.Size = tar.TypeReg, 0o644, int64(len(data))
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		_, err = tw.Write(data)
		return err
	})
	if cerr := tw.Close(); err == nil {
		err = cerr
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
