// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

// Package otelenv holds the checks of OTEL_* values that otelsetup and
// omnitrace both make, so that the two read a value alike. It reads no
// environment variable itself: callers hand it the values. The
// instrumentation (otelomni, spans, attrs) does not import it.
package otelenv

import (
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"

	"github.com/otelomni/otelomni/internal/sanitize"
)

// MaxFileSize bounds a file a variable names (a certificate, a key): it is
// read whole.
const MaxFileSize = 1 << 20

// CheckFile checks a file read whole: a regular file (not a device or a
// pipe, which could block or never end) of at most MaxFileSize bytes,
// readable.
func CheckFile(v string) error {
	st, err := os.Stat(v)
	switch {
	case err != nil:
		return errors.New("cannot read the file")
	case st.IsDir():
		return errors.New("is a folder, not a file")
	case !st.Mode().IsRegular():
		return errors.New("not a regular file")
	case st.Size() > MaxFileSize:
		return fmt.Errorf("larger than %d bytes", MaxFileSize)
	}
	f, err := os.Open(v)
	if err != nil {
		return errors.New("cannot read the file")
	}
	return f.Close()
}

// CheckCertificate checks a file of PEM certificates.
func CheckCertificate(v string) error {
	if err := CheckFile(v); err != nil {
		return err
	}
	b, err := os.ReadFile(v)
	if err != nil {
		return errors.New("cannot read the file")
	}
	if !x509.NewCertPool().AppendCertsFromPEM(b) {
		return errors.New("holds no PEM certificate")
	}
	return nil
}

// CheckResourceAttributes checks key=value pairs separated by commas,
// values percent-encoded, every key and decoded value valid UTF-8, each key
// once (the SDK would keep the last).
func CheckResourceAttributes(v string) error {
	seen := map[string]bool{}
	for _, pair := range strings.Split(v, ",") {
		k, val, ok := strings.Cut(pair, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return errors.New("want key=value pairs separated by commas")
		}
		if seen[k] {
			return fmt.Errorf("key %s given twice", sanitize.String(k, 32))
		}
		seen[k] = true
		d, err := url.PathUnescape(strings.TrimSpace(val))
		if err != nil {
			return errors.New("a value is not percent-encoded correctly")
		}
		if !utf8.ValidString(d) {
			return errors.New("a decoded value is not valid UTF-8")
		}
	}
	return nil
}

// ResourceAttributes is the value of OTEL_RESOURCE_ATTRIBUTES as the SDK
// reads it (and merges it beneath every provider's resource, valid or
// not): pairs separated by commas, key and value trimmed, the value
// percent-decoded, kept as written when it does not decode; a pair without
// '=' or without a key left out; for a key given twice, both in order (a
// resource keeps the last). Each value is made valid UTF-8 and cut to
// limit bytes.
func ResourceAttributes(v string, limit int) []attribute.KeyValue {
	v = strings.TrimSpace(v)
	if v == "" {
		return nil
	}
	var kvs []attribute.KeyValue
	for _, p := range strings.Split(v, ",") {
		k, val, ok := strings.Cut(p, "=")
		if !ok || strings.TrimSpace(k) == "" {
			continue
		}
		d, err := url.PathUnescape(strings.TrimSpace(val))
		if err != nil {
			d = val
		}
		kvs = append(kvs, attribute.String(strings.TrimSpace(k), sanitize.String(d, limit)))
	}
	return kvs
}
