/**
 * The grammar of a container image reference, as the container runtime parses it (distribution/reference, the
 * `reference.go` grammar): `[domain[:port]/]path[:tag][@digest]`, path components lower case, the name at most 255
 * characters. A reference outside it is caught here, on the McpServer, instead of as the kubelet's
 * `InvalidImageName` on a pod.
 */
import { SpecError } from './spec-error.js';

const DOMAIN_COMPONENT = '(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])';
const DOMAIN = `(?:${DOMAIN_COMPONENT}(?:\\.${DOMAIN_COMPONENT})*|\\[[0-9a-fA-F:]+\\])(?::[0-9]+)?`;
const PATH_COMPONENT = '[a-z0-9]+(?:(?:[._]|__|[-]+)[a-z0-9]+)*';
const NAME = `(?:${DOMAIN}/)?${PATH_COMPONENT}(?:/${PATH_COMPONENT})*`;
const TAG = '[\\w][\\w.-]{0,127}';
const DIGEST = '[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}';
const REFERENCE = new RegExp(`^(${NAME})(?::${TAG})?(?:@${DIGEST})?$`);

/** Longest image name (the part before the tag and digest). */
const MAX_NAME = 255;

/**
 * Checks that `image` is a valid image reference.
 * @throws SpecError InvalidSpec naming `field`, saying what the grammar wants.
 */
export function checkImageReference(image: string, field: string): void {
  const match = REFERENCE.exec(image);
  if (!match) {
    const hint = /[A-Z]/.test(image.split('/').slice(1).join('/').split(/[:@]/)[0] ?? '')
      ? ' (the repository path must be lower case)'
      : /\s/.test(image)
        ? ' (it contains white space)'
        : '';
    throw new SpecError(
      field,
      `${JSON.stringify(image)} is not a valid image reference${hint}: use [registry[:port]/]repository[:tag][@sha256:<digest>], e.g. ghcr.io/example/server:1.0`,
    );
  }
  if (match[1]!.length > MAX_NAME)
    throw new SpecError(field, `the image name is ${match[1]!.length} characters long; at most ${MAX_NAME} are allowed`);
}
