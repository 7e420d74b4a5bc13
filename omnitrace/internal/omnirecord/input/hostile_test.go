// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package input

import (
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/otelomni/otelomni/omnitrace/internal/omnirecord/forms"

	"github.com/otelomni/otelomni/omnitrace/internal/omnirecord/literal"
)

func TestHostileLines(t *testing.T) {
	base := oneLine(good)
	swap := func(old, new string) string { return strings.Replace(base, old, new, 1) }
	cases := []struct {
		name string
		line string
		want error // nil: accepted
	}{
		{"a byte-order mark before the first line", literal.BOM + base, nil},
		{"a duplicate key at the top", swap(`"model": "Qwen/Qwen-Image",`, `"model": "Qwen/Qwen-Image", "model": "other",`), forms.ErrDuplicateKey},
		{"a duplicate key in a stage's metrics", swap(`"postprocess_time_ms": 45.2`, `"postprocess_time_ms": 45.2, "postprocess_time_ms": 45.2`), forms.ErrDuplicateKey},
		{"a NaN request id", swap(`"request_id": "chatcmpl-ac59cea85b422f04"`, `"request_id": NaN`), forms.ErrBadField},
		{"an infinite request id", swap(`"request_id": "chatcmpl-ac59cea85b422f04"`, `"request_id": -Infinity`), forms.ErrBadField},
		{"four parts of 4.6e9 s inside a 1 s exec", `{"request_id":"a","arrival_time":1796000000,"stages":[{"stage_id":0,"submit_time":1796000000,` +
			`"scheduler_queue_wait_s": 4.6e9, "kv_recv_time_s": 4.6e9, "forward_time_s": 4.6e9, "vae_decode_time_s": 4.6e9, "diffusion_engine_exec_time_s": 1}]}`, forms.ErrPartsExceed},
		{"an arrival after 2262", swap(`"arrival_time": 1796000000.125`, `"arrival_time": 9300000000`), forms.ErrOutOfRange},
		{"a duration beyond any clock", swap(`"postprocess_time_ms": 45.2`, `"postprocess_time_s": 1e12`), forms.ErrOutOfRange},
		{"nesting deeper than the bound", swap(`"modality": "image"`, `"x": `+strings.Repeat("[", 100)+strings.Repeat("]", 100)), forms.ErrNotJSON},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := forms.Parse([]byte(c.line))
			if c.want == nil && err != nil || c.want != nil && !errors.Is(err, c.want) {
				t.Errorf("err %v, want %v", err, c.want)
			}
			if err != nil && len(err.Error()) > 512 {
				t.Errorf("an error of %d bytes", len(err.Error()))
			}
		})
	}
}

// TestOutOfRangeDurationIsRefusedNamingThePhase: a duration that fits in a
// time.Duration but ends after 2262 once placed is refused before any
// span is made, and the error names the phase.
func TestOutOfRangeDurationIsRefusedNamingThePhase(t *testing.T) {
	line := strings.Replace(oneLine(good), `"postprocess_time_ms": 45.2`, `"postprocess_time_s": 9e9`, 1)
	r, err := forms.Parse([]byte(line))
	if err != nil {
		t.Fatal(err)
	}
	ss, err := emitStubs(time.Time{}, r)
	if !errors.Is(err, forms.ErrOutOfRange) || !strings.Contains(err.Error(), "postprocess") {
		t.Errorf("err %v, want one naming postprocess and the range", err)
	}
	if n := len(ss); n != 0 {
		t.Errorf("%d spans made for a refused request", n)
	}
}

// TestWorkPerLineIsBounded: a line of NaN tokens, or of keys, costs work
// linear in its length. It measures allocations, not time, so that it
// holds on a busy machine.
func TestWorkPerLineIsBounded(t *testing.T) {
	nans := `{"request_id":"a","arrival_time":1796000000,"stages":[{"stage_id":0,"submit_time":1796000000,"x":[` +
		strings.Repeat("NaN,", 200000) + `NaN]}]}`
	keys := `{"request_id":"a","arrival_time":1796000000,"stages":[{"stage_id":0,"submit_time":1796000000` +
		strings.Repeat(`,"k`+`"`+`:1`, 1) + `}],` + manyKeys(50000) + `}`
	for name, line := range map[string]string{"NaN tokens": nans, "keys": keys} {
		allocs := testing.AllocsPerRun(1, func() { _, _ = forms.Parse([]byte(line)) })
		var m runtimeBytes
		bytes := m.during(func() { _, _ = forms.Parse([]byte(line)) })
		if bytes > 40*uint64(len(line)) {
			t.Errorf("%s: %d bytes allocated for a %d-byte line", name, bytes, len(line))
		}
		t.Logf("%s: %d-byte line, %.0f allocations, %d bytes", name, len(line), allocs, bytes)
	}
}

func manyKeys(n int) string {
	var b strings.Builder
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`"key`)
		b.WriteString(strings.Repeat("x", i%7))
		b.WriteString(itoa(i))
		b.WriteString(`":1`)
	}
	return b.String()
}

func itoa(i int) string {
	if i == 0 {
		return "0"
	}
	var d []byte
	for ; i > 0; i /= 10 {
		d = append([]byte{byte('0' + i%10)}, d...)
	}
	return string(d)
}

func TestUntrustedStringsAreBoundedAndValid(t *testing.T) {
	long := strings.Repeat("日", 100000)
	line := `{"request_id":"` + long + "\xff" + `","model":"m` + "\xfe" + `","arrival_time":1796000000,"stages":[{"stage_id":0,"stage_name":"` + long + `","submit_time":1796000000,"` + long + `":"` + long + `","forward_time_ms":1}]}`
	r, err := forms.Parse([]byte(line))
	if err != nil {
		t.Fatal(err)
	}
	ss, err := emitStubs(time.Time{}, r)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range ss {
		for _, kv := range s.Attributes() {
			if len(kv.Key) > forms.MaxKeyBytes || !utf8.ValidString(string(kv.Key)) {
				t.Errorf("%s: key of %d bytes", s.Name(), len(kv.Key))
			}
			if v := kv.Value.String(); len(v) > forms.MaxValueBytes || !utf8.ValidString(v) {
				t.Errorf("%s: %s has %d bytes", s.Name(), kv.Key, len(v))
			}
		}
	}
}
