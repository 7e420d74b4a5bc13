//go:build race

// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package otelsetup_test

const raceEnabled = true
