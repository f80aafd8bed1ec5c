// Flat config: typescript-eslint's recommended rules over every TypeScript source.
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['dist/**', 'node_modules/**', 'coverage/**', 'test/fixtures/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    files: ['**/*.ts'],
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/consistent-type-imports': 'error',
      'no-console': 'off',
    },
  },
  {
    // Tests poke at JSON replies and error objects; `any` there costs nothing and reads better.
    files: ['test/**/*.ts'],
    rules: { '@typescript-eslint/no-explicit-any': 'off' },
  },
  {
    // Only the composition root and the CLI may read the environment or exit (docs/architecture.md rule 5).
    files: ['src/**/*.ts'],
    ignores: ['src/main.ts', 'src/cli/**', 'src/config/**'],
    rules: {
      'no-restricted-properties': ['error',
        { object: 'process', property: 'env', message: 'Only src/main.ts, src/cli/ and src/config/ read process.env.' },
        { object: 'process', property: 'exit', message: 'Only src/main.ts, src/cli/ and src/config/ call process.exit.' }],
    },
  },
);
