import { GATEWAY_CONTROLLER } from '../config/gateway-options.ts';
import { CLASS_ANNOTATION, DEFAULT_CLASS_ANNOTATION, type Ingress, type IngressClass } from './objects.ts';

/** The controller name our IngressClass carries in spec.controller. */
export const CONTROLLER = GATEWAY_CONTROLLER;

export interface ClassPolicy {
  /** spec.controller values that are ours. */
  controller: string;
  /** Also serve Ingresses without any class, even when none of our classes is the default. */
  watchWithoutClass: boolean;
}

/**
 * Which Ingresses this gateway serves (networking.k8s.io/v1 IngressClass semantics):
 * - `spec.ingressClassName` naming an IngressClass whose `spec.controller` is ours;
 * - else the deprecated `kubernetes.io/ingress.class` annotation naming such a class;
 * - else (no class at all) when one of our classes carries
 *   `ingressclass.kubernetes.io/is-default-class: "true"`, or the policy says so. The API's
 *   admission plugin writes the default class into new Ingresses; this covers the ones created
 *   before the class was made default, as ingress-nginx's --watch-ingress-without-class does.
 */
export function ourClasses(
  classes: Iterable<IngressClass>,
  policy: ClassPolicy,
): { names: Set<string>; isDefault: boolean } {
  const names = new Set<string>();
  let isDefault = false;
  for (const c of classes) {
    if (c.spec.controller !== policy.controller) continue;
    names.add(c.metadata.name);
    if (c.metadata.annotations?.[DEFAULT_CLASS_ANNOTATION] === 'true') isDefault = true;
  }
  return { names, isDefault };
}

export function selectIngresses(
  ingresses: Iterable<Ingress>,
  classes: Iterable<IngressClass>,
  policy: ClassPolicy,
): Ingress[] {
  const ours = ourClasses(classes, policy);
  const classless = ours.isDefault || policy.watchWithoutClass;
  const out: Ingress[] = [];
  for (const ing of ingresses) {
    const name = ing.spec.ingressClassName ?? ing.metadata.annotations?.[CLASS_ANNOTATION];
    if (name === undefined ? classless : ours.names.has(name)) out.push(ing);
  }
  return out;
}
