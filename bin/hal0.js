#!/usr/bin/env -S node --max-semi-space-size=2
// `node bin/hal0.js …`: the same CLI as the `hal0` command, which is bin/hal0.cjs (see there).
// This file is an ES module (the package's type), so node starts its ES module loader before
// the CLI; the `hal0` command skips that.
import "./hal0.cjs";
