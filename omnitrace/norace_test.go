//go:build !race

// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package main

const raceEnabled = false
