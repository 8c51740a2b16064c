// Image references as the container runtime parses them (distribution/reference): what is accepted, and what is
// refused on the McpServer, naming spec.image, before any kubelet meets InvalidImageName.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { checkImageReference } from '../image-reference.js';
import { buildServerChildren, SpecError } from '../server-children.js';
import { childrenOptions, mcpServer } from './server-fixtures.js';

describe('image references', () => {
  it('accepts names with a registry, a port, a tag and a digest', () => {
    for (const image of [
      'busybox',
      'library/busybox:1.36',
      'ghcr.io/example/fs-server:1.0',
      'registry.example.com:5000/team/a/server:v2.1-rc.1',
      'localhost/server',
      `ghcr.io/example/server@sha256:${'a'.repeat(64)}`,
      `ghcr.io/example/server:1.0@sha256:${'0'.repeat(64)}`,
      '[::1]:5000/server:1',
      'example.com/a__b/c-d.e',
    ])
      assert.doesNotThrow(() => checkImageReference(image, 'spec.image'), image);
  });

  it('refuses what the runtime would call InvalidImageName, saying why', () => {
    const refused: [string, RegExp][] = [
      ['ghcr.io/Example/Server:1.0', /the repository path must be lower case/],
      ['ghcr.io/example/server:1.0 ', /white space/],
      ['ghcr.io/example/server::1', /is not a valid image reference: use \[registry\[:port\]\/\]repository\[:tag\]\[@sha256:<digest>\]/],
      ['ghcr.io/example/server@sha256:abc', /not a valid image reference/],
      ['-server', /not a valid image reference/],
      [`ghcr.io/${'a'.repeat(260)}`, /at most 255/],
    ];
    for (const [image, message] of refused) {
      assert.throws(
        () => checkImageReference(image, 'spec.image'),
        (e: SpecError) =>
          e instanceof SpecError && e.field === 'spec.image' && e.message.startsWith('spec.image: ') && message.test(e.message),
        image,
      );
    }
  });

  it('is checked when the children are built', () => {
    assert.throws(
      () => buildServerChildren(mcpServer('s', { image: 'ghcr.io/Example/s:1', command: ['s'] }), childrenOptions()),
      (e: SpecError) =>
        e instanceof SpecError &&
        e.reason === 'InvalidSpec' &&
        /^spec\.image: "ghcr\.io\/Example\/s:1" is not a valid image reference/.test(e.message),
    );
  });
});
