// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package forms

import (
	"testing"
	"time"
)

// TestALogLineTakesTheYearItsDateExistsIn: vLLM writes no year; a line is
// given the latest year that puts it at most a day after the file was
// written, and 02-29 a leap year, never March 1st.
func TestALogLineTakesTheYearItsDateExistsIn(t *testing.T) {
	cases := []struct {
		stamp string
		ref   time.Time
		want  time.Time
	}{
		{"02-29 10:00:00", time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC), time.Date(2024, 2, 29, 10, 0, 0, 0, time.UTC)},
		{"02-29 10:00:00", time.Date(2028, 3, 1, 0, 0, 0, 0, time.UTC), time.Date(2028, 2, 29, 10, 0, 0, 0, time.UTC)},
		{"11-30 05:10:44", time.Date(2026, 11, 30, 6, 0, 0, 0, time.UTC), time.Date(2026, 11, 30, 5, 10, 44, 0, time.UTC)},
		{"12-01 05:10:44", time.Date(2026, 11, 30, 6, 0, 0, 0, time.UTC), time.Date(2026, 12, 1, 5, 10, 44, 0, time.UTC)},
		{"12-31 23:00:00", time.Date(2026, 11, 30, 6, 0, 0, 0, time.UTC), time.Date(2025, 12, 31, 23, 0, 0, 0, time.UTC)},
		{"01-01 00:30:00", time.Date(2026, 12, 31, 23, 0, 0, 0, time.UTC), time.Date(2027, 1, 1, 0, 30, 0, 0, time.UTC)},
	}
	for _, c := range cases {
		tm, err := time.ParseInLocation("01-02 15:04:05", c.stamp, time.UTC)
		if err != nil {
			t.Fatal(err)
		}
		if got := withYear(tm, c.ref); !got.Equal(c.want) {
			t.Errorf("%s read on %s: %s, want %s", c.stamp, c.ref.Format(time.DateOnly), got, c.want)
		}
	}
}

// TestTheYearIsCountedInTheLogsZone: New Year's Eve in Tokyo, read on New
// Year's Day there (still the 31st in UTC): the year is Tokyo's.
func TestTheYearIsCountedInTheLogsZone(t *testing.T) {
	tokyo, err := time.LoadLocation("Asia/Tokyo")
	if err != nil {
		t.Skip(err)
	}
	tm, _ := time.ParseInLocation("01-02 15:04:05", "01-01 00:30:00", tokyo)
	ref := time.Date(2026, 12, 31, 16, 0, 0, 0, time.UTC) // 2027-01-01 01:00 in Tokyo
	if got, want := withYear(tm, ref), time.Date(2027, 1, 1, 0, 30, 0, 0, tokyo); !got.Equal(want) {
		t.Errorf("%v, want %v", got, want)
	}
}
