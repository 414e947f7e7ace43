import assert from 'node:assert/strict';
import { test } from 'node:test';
import { nearMiss } from '../../../src/cli/check-data-plane.ts';

test('a namespace that means to opt in but does not is named with what is wrong', () => {
  const ns = (labels: Record<string, string> = {}, annotations: Record<string, string> = {}) => ({
    name: 'shop',
    labels,
    annotations,
  });
  assert.equal(nearMiss(ns({ 'outrigger.dev/injection': 'enabled' })), undefined);
  assert.equal(nearMiss(ns()), undefined);
  assert.equal(nearMiss(ns({ team: 'a' })), undefined);
  // The explicit opt-out (the gateway's namespace carries it) is no near miss.
  assert.equal(nearMiss(ns({ 'outrigger.dev/injection': 'disabled' })), undefined);
  assert.match(nearMiss(ns({ 'outrigger.dev/injection': 'true' })) ?? '', /="true" is not "enabled"/);
  assert.match(nearMiss(ns({}, { 'outrigger.dev/injection': 'enabled' })) ?? '', /is an annotation/);
  assert.match(
    nearMiss(ns({ 'outrigger.dev/inject': 'enabled' })) ?? '',
    /label outrigger.dev\/inject is not/,
  );
  assert.match(nearMiss(ns({ 'outrigger-injection': 'enabled' })) ?? '', /label outrigger-injection is not/);
});
