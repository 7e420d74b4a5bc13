// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

// Package tracediff says what changed between two runs of an omni
// pipeline, from their traces: one row per (modality, stage, phase), and
// per model when asked, with each side's requests, the share of them that
// measured the phase, p50 and p99 with confidence intervals, the change
// and its significance, and the critical path's share of each phase and
// stage, as benchstat compares benchmarks.
//
// A [Side] reads one run's traces ([Side.Add], a trace at a time) and
// keeps, per row, exact counts and a uniform sample of at most
// [Settings.Samples] values (reservoir sampling), for at most
// [Settings.MaxRows] rows: its memory is a formula of its settings,
// never of the input's length. [Compare] compares two sides.
//
// The statistics are golang.org/x/perf's benchmath (the median and its
// confidence interval, the Mann–Whitney U test) and the quantile
// confidence intervals of the package benchmath is built on
// (github.com/aclements/go-moremath/stats); the test of two shares
// measured is gonum's Pearson chi-squared statistic and distribution.
// Only the corrections for many tests (Holm's and Benjamini and
// Hochberg's, a sort and a running bound each) are written here: neither
// library offers them.
package tracediff
