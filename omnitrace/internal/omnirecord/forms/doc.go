// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

// Package forms reads a request's timing from each form it is written in,
// into a [Request]: this project's own JSON lines (one request a line,
// [Parse]), and what vLLM-Omni writes itself, one record at a time: the
// rows of its orchestrator's summary dict ([SummaryRows]), the
// [OmniTiming] lines ([ParseOmniTiming]) and per-request box tables of its
// log, the event dicts of its older releases, and the prefix of a log
// line that gives its time ([SplitLogLine]). A [Builder] gathers what the
// records of one request say; [MergeForms] merges the requests that
// several forms of one run give.
//
// A phase that was not measured is no key of [Stage.Durations]; a phase
// measured as 0 is one, at 0; a 0 that the writer puts for "not measured"
// is read as not measured (see docs/omnitrace.md for each field). The
// records' text is parsed by package literal; the lines that hold them
// are gathered by package input; package emit places the phases and makes
// the spans.
package forms
