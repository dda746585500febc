export const csvImportHandlers = {};
