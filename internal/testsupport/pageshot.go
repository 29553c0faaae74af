package testsupport

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// The screenshots in docs/img are taken by the browser tests from the pages
// as they are, and each carries a stamp of the page's files (web/static)
// they were taken of, in a PNG text chunk: a docs test compares the stamp
// with the files of today, so a picture of an older page fails the build
// instead of going stale in the README.

// pageStampKey is the PNG tEXt keyword the stamp is kept under.
const pageStampKey = "flashsale-page"

// PageStamp is a digest of every file under dir (web/static: the pages'
// HTML, CSS and JavaScript), by path and content.
func PageStamp(dir string) (string, error) {
	h := sha256.New()
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		h.Write([]byte(filepath.ToSlash(rel) + "\x00"))
		h.Write(bytes.ReplaceAll(b, []byte("\r\n"), []byte("\n")))
		h.Write([]byte{0})
		return nil
	})
	if err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}

// pngSignature starts every PNG file.
var pngSignature = []byte("\x89PNG\r\n\x1a\n")

// StampPNG returns png with a text chunk holding stamp, right after its
// header chunk (IHDR, always first).
func StampPNG(png []byte, stamp string) ([]byte, error) {
	if !bytes.HasPrefix(png, pngSignature) || len(png) < 8+8+13+4 {
		return nil, errors.New("not a PNG image")
	}
	afterIHDR := 8 + 8 + int(binary.BigEndian.Uint32(png[8:12])) + 4
	data := []byte(pageStampKey + "\x00" + stamp)
	chunk := binary.BigEndian.AppendUint32(nil, uint32(len(data)))
	chunk = append(chunk, "tEXt"...)
	chunk = append(chunk, data...)
	chunk = binary.BigEndian.AppendUint32(chunk, crc32.ChecksumIEEE(chunk[4:]))
	out := append([]byte{}, png[:afterIHDR]...)
	out = append(out, chunk...)
	return append(out, png[afterIHDR:]...), nil
}

// PNGStamp is the stamp StampPNG put in png, or "" if it has none.
func PNGStamp(png []byte) string {
	if !bytes.HasPrefix(png, pngSignature) {
		return ""
	}
	for rest := png[8:]; len(rest) >= 12; {
		n := int(binary.BigEndian.Uint32(rest[:4]))
		if len(rest) < 12+n {
			return ""
		}
		if string(rest[4:8]) == "tEXt" {
			if key, value, ok := strings.Cut(string(rest[8:8+n]), "\x00"); ok && key == pageStampKey {
				return value
			}
		}
		rest = rest[12+n:]
	}
	return ""
}
