/**
 * An editor of name/value rows (a registration's environment variables or headers, a credential's keys), whose
 * values may be picked from `cred:` references (a `<datalist>` of the tenant's credentials).
 */
import type { CredentialView } from './api.js';

/** One row. */
export interface NamedValue {
  name: string;
  value: string;
}

/** The rows as a record, rows without a name left out; undefined when none has one. */
export function recordOf(values: readonly NamedValue[]): Record<string, string> | undefined {
  const named = values.filter((row) => row.name.trim() !== '');
  return named.length === 0 ? undefined : Object.fromEntries(named.map((row) => [row.name.trim(), row.value]));
}

/** The references a value may take: `cred:<id>` for each credential, and `cred:<id>/<key>` when it has several keys. */
export function credentialReferences(credentials: readonly CredentialView[]): string[] {
  return credentials.flatMap((c) => [`cred:${c.id}`, ...(c.keys.length > 1 ? c.keys.map((key) => `cred:${c.id}/${key}`) : [])]);
}

/**
 * The rows, each with a labelled name and value input ("<item> 1 name", "<item> 1 value"), a remove button, and
 * an add button; `references` are offered on every value input. `secret` hides what is typed in the values.
 */
export function NamedValues(props: {
  legend: string;
  item: string;
  values: NamedValue[];
  onChange: (values: NamedValue[]) => void;
  references?: string[];
  secret?: boolean;
}) {
  const { values, onChange, item } = props;
  const listId = `refs-${item.toLowerCase().replace(/\W+/g, '-')}`;
  const set = (index: number, change: Partial<NamedValue>) => onChange(values.map((row, i) => (i === index ? { ...row, ...change } : row)));
  return (
    <fieldset>
      <legend>{props.legend}</legend>
      {props.references && props.references.length > 0 && (
        <>
          <p class="muted">Values may name a credential: type cred: to pick one.</p>
          <datalist id={listId}>
            {props.references.map((reference) => (
              <option key={reference} value={reference} />
            ))}
          </datalist>
        </>
      )}
      {values.map((row, index) => (
        <div class="row" key={index}>
          <input aria-label={`${item} ${index + 1} name`} value={row.name} onInput={(e) => set(index, { name: e.currentTarget.value })} />
          {props.secret ? (
            <input
              aria-label={`${item} ${index + 1} value`}
              value={row.value}
              type="password"
              autocomplete="off"
              onInput={(e) => set(index, { value: e.currentTarget.value })}
            />
          ) : (
            <input
              aria-label={`${item} ${index + 1} value`}
              value={row.value}
              type="text"
              autocomplete="off"
              spellcheck={false}
              list={props.references && props.references.length > 0 ? listId : undefined}
              onInput={(e) => set(index, { value: e.currentTarget.value })}
            />
          )}
          <button
            type="button"
            class="quiet grow-0"
            aria-label={`Remove ${item.toLowerCase()} ${index + 1}`}
            onClick={() => onChange(values.filter((_, i) => i !== index))}
          >
            Remove
          </button>
        </div>
      ))}
      <button type="button" class="quiet" onClick={() => onChange([...values, { name: '', value: '' }])}>
        + Add {item.toLowerCase()}
      </button>
    </fieldset>
  );
}
