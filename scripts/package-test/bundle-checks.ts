import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import ts from 'typescript';

/**
 * Checks of the built files themselves, run on the installed package. Each
 * returns a list of problems, empty when the package is sound.
 */

/**
 * Every source module must land in exactly one output file per module
 * system: a module bundled into two entries runs twice, and a class it
 * defines (RheoError) then has two identities, so `instanceof` and
 * `isRheoError` fail for errors made by the other entry.
 */
export function duplicatedModules(distDir: string): string[] {
  const problems: string[] = [];
  for (const extension of ['.js', '.cjs']) {
    const outputs = readdirSync(distDir).filter((f) => f.endsWith(extension));
    const ownerOf = new Map<string, string[]>();
    for (const output of outputs) {
      const mapFile = join(distDir, `${output}.map`);
      let sources: string[];
      try {
        sources = (JSON.parse(readFileSync(mapFile, 'utf8')) as { sources: string[] }).sources;
      } catch (error) {
        problems.push(`${output}: no readable source map, so duplicated modules cannot be detected (${String(error)})`);
        continue;
      }
      for (const source of sources) ownerOf.set(source, [...(ownerOf.get(source) ?? []), output]);
    }
    for (const [source, owners] of ownerOf) {
      if (owners.length > 1) problems.push(`${source} is bundled into ${owners.join(' and ')}`);
    }
    const definitions = outputs.filter((f) => /\bRheoError = class\b|\bclass RheoError\b/.test(readFileSync(join(distDir, f), 'utf8')));
    if (definitions.length !== 1) {
      problems.push(`RheoError is defined in ${definitions.length} ${extension} files (${definitions.join(', ')}), expected 1`);
    }
  }
  return problems;
}

/**
 * Names the published declarations use but do not export. A bundled
 * declaration file carries only declarations something exported refers to,
 * so any declaration a file keeps to itself is a type users meet in a
 * signature and cannot name; a chunk's export that no entry re-exports is
 * the same, one file further.
 */
export function unexportedDeclarations(distDir: string, entryTypes: string[]): string[] {
  const problems: string[] = [];
  const reexported = new Set<string>();
  const chunkExports: Array<{ file: string; name: string }> = [];
  const files = readdirSync(distDir).filter((f) => f.endsWith('.d.ts') || f.endsWith('.d.cts'));
  for (const file of files) {
    const source = ts.createSourceFile(file, readFileSync(join(distDir, file), 'utf8'), ts.ScriptTarget.Latest, true);
    const isEntry = entryTypes.includes(file);
    const declared = new Set<string>();
    const exported = new Set<string>();
    const imported = new Map<string, string>();
    for (const statement of source.statements) {
      if (ts.isExportDeclaration(statement) && statement.exportClause && ts.isNamedExports(statement.exportClause)) {
        for (const element of statement.exportClause.elements) {
          const local = (element.propertyName ?? element.name).text;
          if (statement.moduleSpecifier) {
            if (isEntry) reexported.add(`${moduleFile(statement.moduleSpecifier)}#${local}`);
          } else {
            exported.add(local);
            if (!isEntry) chunkExports.push({ file, name: element.name.text });
          }
        }
      } else if (ts.isImportDeclaration(statement)) {
        const clause = statement.importClause;
        const from = moduleFile(statement.moduleSpecifier);
        if (!from.startsWith('./') || !clause?.namedBindings || !ts.isNamedImports(clause.namedBindings)) continue;
        for (const element of clause.namedBindings.elements) {
          imported.set(element.name.text, from);
          if (isEntry) reexported.add(`${from}#${(element.propertyName ?? element.name).text}`);
        }
      } else if (isNamedDeclaration(statement)) {
        declared.add(statement.name.text);
      } else if (ts.isVariableStatement(statement)) {
        for (const d of statement.declarationList.declarations) if (ts.isIdentifier(d.name)) declared.add(d.name.text);
      }
    }
    for (const name of declared) if (!exported.has(name)) problems.push(`${file}: ${name} is used by exported types but not exported`);
    if (isEntry) {
      for (const [name, from] of imported) {
        if (!exported.has(name)) problems.push(`${file}: ${name} (from ${from}) is used by exported types but not exported`);
      }
    }
  }
  for (const { file, name } of chunkExports) {
    const base = file.replace(/\.d\.c?ts$/, '');
    const candidates = [`./${base}.js`, `./${base}.cjs`].map((f) => `${f}#${name}`);
    if (!candidates.some((c) => reexported.has(c))) problems.push(`${file}: ${name} is shared by the entries but none exports it`);
  }
  return problems;
}

function moduleFile(specifier: ts.Expression): string {
  return ts.isStringLiteral(specifier) ? specifier.text : specifier.getText();
}

function isNamedDeclaration(
  statement: ts.Statement,
): statement is (ts.ClassDeclaration | ts.InterfaceDeclaration | ts.TypeAliasDeclaration | ts.FunctionDeclaration | ts.EnumDeclaration) & {
  name: ts.Identifier;
} {
  return (
    (ts.isClassDeclaration(statement) ||
      ts.isInterfaceDeclaration(statement) ||
      ts.isTypeAliasDeclaration(statement) ||
      ts.isFunctionDeclaration(statement) ||
      ts.isEnumDeclaration(statement)) &&
    statement.name !== undefined
  );
}

/**
 * The value (runtime) exports an entry's source declares: `export { ... }`
 * without `type`. An `export *` of values would hide names from this list,
 * so it is refused instead of half-read.
 */
export function valueExportsOf(entrySource: string): string[] {
  const source = ts.createSourceFile('entry.ts', readFileSync(entrySource, 'utf8'), ts.ScriptTarget.Latest, true);
  const names: string[] = [];
  for (const statement of source.statements) {
    if (!ts.isExportDeclaration(statement) || statement.isTypeOnly) continue;
    if (!statement.exportClause || !ts.isNamedExports(statement.exportClause)) {
      throw new Error(`${entrySource}: \`export *\` of values; list the names so the package test can check each`);
    }
    for (const element of statement.exportClause.elements) if (!element.isTypeOnly) names.push(element.name.text);
  }
  return names;
}
