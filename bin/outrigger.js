#!/usr/bin/env node
// Runs the compiled CLI (npm ci builds it through the prepare script).
import '../dist/main.js';
