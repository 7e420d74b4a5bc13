// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package input

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestALogIsReadInUTCWhateverTheMachinesZone: a log's lines carry no
// zone; they are read in UTC unless told otherwise, never in the zone of
// the machine that imports (time.Local, from TZ).
func TestALogIsReadInUTCWhateverTheMachinesZone(t *testing.T) {
	tokyo, err := time.LoadLocation("Asia/Tokyo")
	if err != nil {
		t.Skip(err)
	}
	local := time.Local
	time.Local = tokyo
	defer func() { time.Local = local }()
	for _, line := range []string{
		"INFO 11-30 05:10:44 [omni.py:310] [OmniTiming] req=a total=1.00s engine=1.00s stages=[0:1.00s]",
		"2026-11-30 05:10:44,250 [PID:7] INFO: [OmniTiming] req=a total=1.00s engine=1.00s stages=[0:1.00s]",
	} {
		c := readAll(t, []byte(line+"\n"), Options{})
		if len(c.reqs) != 1 {
			t.Fatalf("%d requests, problems %q", len(c.reqs), c.problems)
		}
		if got, want := c.reqs[0].End, time.Date(2026, 11, 30, 5, 10, 44, 0, time.UTC); got.Truncate(time.Second) != want {
			t.Errorf("%s: end %v, want %v", line, got, want)
		}
	}
}

// TestALogIsReadInTheZoneItIsGiven: -tz names the zone a log was written
// in; the year is counted in it too.
func TestALogIsReadInTheZoneItIsGiven(t *testing.T) {
	tokyo, err := time.LoadLocation("Asia/Tokyo")
	if err != nil {
		t.Skip(err)
	}
	c := readAll(t, fixture(t, "vllm.log"), Options{Zone: tokyo})
	if got, want := c.byID(t, "7").End, time.Date(2026, 11, 29, 20, 10, 44, 0, time.UTC); !got.Equal(want) {
		t.Errorf("end %v, want %v", got, want)
	}
}

// TestALineWithoutADateIsRead: a log written with a format that gives no
// date (or no time at all) still has its records read; their requests are
// placed as a summary's are, and the input says so once.
func TestALineWithoutADateIsRead(t *testing.T) {
	log := strings.Join([]string{
		"INFO 05:10:44 [omni.py:310] [OmniTiming] req=a total=1.00s engine=1.00s stages=[0:1.00s]",
		"INFO [omni.py:310] [OmniTiming] req=b total=2.00s engine=2.00s stages=[0:2.00s]",
	}, "\n")
	c := readAll(t, []byte(log), Options{})
	var ids []string
	for _, r := range c.reqs {
		ids = append(ids, r.ID)
		if !r.End.IsZero() {
			t.Errorf("request %s ends at %v: its line has no date", r.ID, r.End)
		}
	}
	if fmt.Sprint(ids) != "[a b]" || len(c.problems) != 1 || !strings.Contains(c.problems[0], "without a date") {
		t.Errorf("requests %v, problems %q", ids, c.problems)
	}
}

// TestAReusedIDIsCountedAlikeInEveryForm: the summary and the log of two
// runs that reuse request id 7 (a restarted engine) both tell the first 7
// from the second, by which of the 7s it is: each form gives each request
// the key the other gives it.
func TestAReusedIDIsCountedAlikeInEveryForm(t *testing.T) {
	keys := func(name string) []string {
		var out []string
		for _, r := range readAll(t, fixture(t, "run/"+name), Options{}).reqs {
			out = append(out, fmt.Sprintf("%s %x", r.ID, r.Key()))
		}
		slices.Sort(out)
		return out
	}
	summary, log := keys("summary.json"), keys("vllm.log")
	if len(summary) != 3 || !slices.Equal(summary, log) {
		t.Errorf("the summary's keys %q, the log's %q", summary, log)
	}
}

// TestAnHourShownTwiceIsReadInTheLogsOrder: in a zone with daylight
// saving, a wall clock of the hour repeated when the clocks go back is
// its first occurrence, unless that would go back before the line before
// it; one of the hour skipped when they go forward is an hour later.
func TestAnHourShownTwiceIsReadInTheLogsOrder(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Skip(err)
	}
	line := func(stamp, id string) string {
		return "INFO " + stamp + " [omni.py:310] [OmniTiming] req=" + id + " total=1.00s engine=1.00s stages=[0:1.00s]"
	}
	log := strings.Join([]string{
		line("10-25 01:59:59", "a"), // CEST
		line("10-25 02:30:00", "b"), // CEST, the first 02:30
		line("10-25 02:10:00", "c"), // CET: the clocks went back
		line("10-25 03:00:01", "d"), // CET
		line("03-29 02:30:00", "e"), // skipped by the clocks: 03:30 CEST
	}, "\n")
	c := readAll(t, []byte(log), Options{Zone: berlin, Settle: -1})
	want := map[string]time.Time{
		"a": time.Date(2026, 10, 24, 23, 59, 59, 0, time.UTC),
		"b": time.Date(2026, 10, 25, 0, 30, 0, 0, time.UTC),
		"c": time.Date(2026, 10, 25, 1, 10, 0, 0, time.UTC),
		"d": time.Date(2026, 10, 25, 2, 0, 1, 0, time.UTC),
		"e": time.Date(2026, 3, 29, 1, 30, 0, 0, time.UTC),
	}
	for id, w := range want {
		if got := c.byID(t, id).End; !got.Equal(w) {
			t.Errorf("request %s ends at %v, want %v", id, got.UTC(), w)
		}
	}
}

// TestAFollowedLogGetsTheNewYearRight: a log followed since December gets
// the year of its January lines from the time they are read.
func TestAFollowedLogGetsTheNewYearRight(t *testing.T) {
	c := &collected{}
	in, err := NewInput(time.Date(2026, 12, 30, 12, 0, 0, 0, time.UTC), Options{Settle: -1}, c)
	if err != nil {
		t.Fatal(err)
	}
	in.SetNow(time.Date(2027, 1, 3, 6, 0, 0, 0, time.UTC))
	in.Line([]byte("INFO 01-03 05:00:00 [omni.py:310] [OmniTiming] req=a total=1.00s engine=1.00s stages=[0:1.00s]"), 0)
	in.End()
	if len(c.reqs) != 1 || c.reqs[0].End.Year() != 2027 {
		t.Errorf("requests %v", c.reqs)
	}
}
