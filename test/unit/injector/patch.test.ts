import assert from 'node:assert/strict';
import { test } from 'node:test';
import { applyPatch, escapePointer, PatchBuilder } from '../../../src/injector/patch.ts';

test('pointer keys escape ~ and / (RFC 6901)', () => {
  assert.equal(escapePointer('outrigger.dev/inject'), 'outrigger.dev~1inject');
  assert.equal(escapePointer('a~/b'), 'a~0~1b');
  const doc = applyPatch({ m: {} }, [{ op: 'add', path: '/m/a~0~1b', value: 1 }]);
  assert.deepEqual(doc, { m: { 'a~/b': 1 } });
});

test('the builder extends arrays and maps, never replaces them', () => {
  const doc = { list: ['x'], map: { k: 'v' } };
  const b = new PatchBuilder();
  b.prepend('/list', doc.list, ['a', 'b']);
  b.append('/list', doc.list, ['z']);
  b.addEntries('/map', doc.map, { 'n/1': 'w' });
  b.prepend('/none', undefined, ['only']);
  b.append('/empty', [], []);
  assert.deepEqual(applyPatch(doc, b.ops), {
    list: ['a', 'b', 'x', 'z'],
    map: { k: 'v', 'n/1': 'w' },
    none: ['only'],
  });
  assert.deepEqual(doc, { list: ['x'], map: { k: 'v' } }, 'the input is not modified');
});

test('a patch that does not fit the document fails loudly', () => {
  assert.throws(() => applyPatch({}, [{ op: 'add', path: '/a/b', value: 1 }]), /does not exist/);
  assert.throws(() => applyPatch({ a: [] }, [{ op: 'add', path: '/a/3', value: 1 }]), /out of range/);
});
